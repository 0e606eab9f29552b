//! Policies: named outcomes; the resiliency ones drive placement.

use super::attributes::PolicySettings;
use super::commands::{CreatePolicy, ResiliencyLevels, UpdatePolicy};
use super::{Caller, ServiceError, ServiceResult, Services};
use svs_domain::Resiliency;
use svs_store::{Policy, PolicyWrite};

/// Defaults of the reference API when a resiliency field is omitted.
const DEFAULT_RESILIENCY: Resiliency = Resiliency {
    media: 2,
    node: 1,
    zone: 1,
};

/// `current` with the levels a request sets.
fn with_levels(current: Resiliency, levels: &ResiliencyLevels) -> Resiliency {
    Resiliency {
        media: levels.media.unwrap_or(current.media),
        node: levels.node.unwrap_or(current.node),
        zone: levels.zone.unwrap_or(current.zone),
    }
}

impl Services {
    /// The stored form of a policy: `base` (the current policy, None for a
    /// new one) with what the request sets.
    fn policy_write(
        &self,
        caller: &Caller,
        name: String,
        resiliency: Resiliency,
        settings: &PolicySettings,
        base: Option<&Policy>,
    ) -> PolicyWrite {
        PolicyWrite {
            name,
            resiliency,
            attributes: settings.apply_to(base),
            by_name: caller.name.clone(),
            by_email: caller.email.clone(),
            now_ms: self.clock.now_ms(),
        }
    }

    pub async fn create_policy(
        &self,
        caller: &Caller,
        request: &CreatePolicy,
    ) -> ServiceResult<Policy> {
        let write = self.policy_write(
            caller,
            request.name.as_str().to_string(),
            with_levels(DEFAULT_RESILIENCY, &request.resiliency),
            &request.settings,
            None,
        );
        Ok(self.store.create_policy(caller.tenant_id, &write).await?)
    }

    pub async fn list_policies(&self, caller: &Caller) -> ServiceResult<Vec<Policy>> {
        Ok(self.store.list_policies(caller.tenant_id).await?)
    }

    pub async fn get_policy(&self, caller: &Caller, name: &str) -> ServiceResult<Policy> {
        self.store
            .get_policy(caller.tenant_id, name)
            .await?
            .ok_or_else(|| policy_not_found(name))
    }

    pub async fn update_policy(
        &self,
        caller: &Caller,
        name: &str,
        request: &UpdatePolicy,
    ) -> ServiceResult<Policy> {
        let current = self.get_policy(caller, name).await?;
        let write = self.policy_write(
            caller,
            request
                .name
                .as_ref()
                .map(|n| n.as_str().to_string())
                .unwrap_or_else(|| current.name.clone()),
            with_levels(current.resiliency, &request.resiliency),
            &request.settings,
            Some(&current),
        );
        self.store
            .update_policy(caller.tenant_id, name, &write)
            .await
            .map_err(|e| match e {
                svs_store::StoreError::NotFound => policy_not_found(name),
                other => other.into(),
            })
    }

    pub async fn delete_policy(&self, caller: &Caller, name: &str) -> ServiceResult<()> {
        self.store
            .delete_policy(caller.tenant_id, name)
            .await
            .map_err(|e| match e {
                svs_store::StoreError::NotFound => policy_not_found(name),
                other => other.into(),
            })
    }
}

pub fn policy_not_found(name: &str) -> ServiceError {
    ServiceError::NotFound(format!("policy '{name}' not found"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{TestServices, START_MS};
    use std::time::Duration;
    use svs_domain::ResourceName;

    #[test]
    fn omitted_levels_keep_the_current_ones() {
        let levels = ResiliencyLevels {
            zone: Some(0),
            ..ResiliencyLevels::default()
        };
        assert_eq!(
            with_levels(DEFAULT_RESILIENCY, &levels),
            Resiliency {
                media: 2,
                node: 1,
                zone: 0
            }
        );
        assert_eq!(
            with_levels(DEFAULT_RESILIENCY, &ResiliencyLevels::default()),
            DEFAULT_RESILIENCY
        );
    }

    #[tokio::test]
    async fn policies_are_stamped_with_the_services_clock() {
        let app = TestServices::new(Duration::from_secs(60), Duration::from_secs(60)).await;
        let caller = Caller {
            user_id: 1,
            tenant_id: 1,
            email: "a@b.c".into(),
            name: "a".into(),
            is_admin: false,
        };
        app.add_user("default", "a@b.c", "a-password", false).await;
        let create = CreatePolicy {
            name: ResourceName::parse("policy", "gold").expect("valid name"),
            resiliency: ResiliencyLevels::default(),
            settings: Default::default(),
        };
        let created = app
            .services
            .create_policy(&caller, &create)
            .await
            .expect("created");
        assert_eq!(created.created_ms, START_MS);
        assert_eq!(created.resiliency, DEFAULT_RESILIENCY);
        app.advance(Duration::from_secs(90));
        let update = UpdatePolicy {
            resiliency: ResiliencyLevels {
                node: Some(0),
                ..ResiliencyLevels::default()
            },
            ..UpdatePolicy::default()
        };
        let updated = app
            .services
            .update_policy(&caller, "gold", &update)
            .await
            .expect("updated");
        assert_eq!(updated.updated_ms, Some(START_MS + 90_000));
        assert_eq!(updated.resiliency.node, 0);
        assert_eq!(updated.resiliency.media, 2);
    }
}
