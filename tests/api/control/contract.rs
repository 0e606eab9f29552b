//! The published API contract: `/openapi.json` lists exactly the routes the
//! router answers, with the security and error responses each has.

use crate::harness::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use svs_api::api::{route_table, Route, SECURITY_SCHEME};

const METHODS: [&str; 8] = [
    "get", "post", "put", "patch", "delete", "head", "options", "trace",
];

/// Operations that need no IdToken.
const PUBLIC: [(&str, &str); 9] = [
    ("POST", "/signin"),
    ("POST", "/signout"),
    ("POST", "/refresh"),
    ("GET", "/tenant/apiaccess/credentials/refresh"),
    ("GET", "/version"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/.well-known/jwks.json"),
    ("GET", "/openapi.json"),
];

async fn document(app: &TestApp) -> Value {
    let (status, doc) = app.request(None, Method::GET, "/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK, "{doc}");
    doc
}

/// (METHOD, path) of every operation of the document.
fn operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut set = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in METHODS {
            if item.get(method).is_some() {
                set.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    set
}

/// A concrete path for a templated one: every parameter filled in.
fn concrete(path: &str) -> String {
    path.replace("{snapshot}", "top")
        .replace("{file}", "index.html")
        .split('/')
        .map(|segment| {
            if segment.starts_with('{') {
                "probe"
            } else {
                segment
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Whether the router has a route for (method, path): anything but its
/// fallbacks' answers (404 "no such route", 405).
async fn routed(app: &TestApp, method: &Method, path: &str) -> (bool, StatusCode, Value) {
    let response = app
        .client
        .request(method.clone(), format!("{}{}", app.base, concrete(path)))
        .send()
        .await
        .expect("request sent");
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let fallback = status == StatusCode::METHOD_NOT_ALLOWED
        || (status == StatusCode::NOT_FOUND && body == json!({"message": "no such route"}));
    (!fallback, status, body)
}

#[tokio::test]
async fn the_document_lists_exactly_the_routes_the_router_answers() {
    let app = TestApp::start().await;
    let doc = document(&app).await;
    assert_eq!(doc["openapi"], "3.1.0");

    let table = route_table();
    let documented: BTreeSet<(String, String)> = table
        .iter()
        .filter(|r| r.documented)
        .map(|r| (r.method.to_string(), r.path.clone()))
        .collect();
    assert_eq!(operations(&doc), documented);

    // Every route of the table is routed (documented or console) ...
    for Route { method, path, .. } in &table {
        let (is_routed, status, body) = routed(&app, method, path).await;
        assert!(is_routed, "{method} {path}: {status} {body}");
    }
    // ... and no other method is, on any of their paths.
    let paths: BTreeSet<&str> = table.iter().map(|r| r.path.as_str()).collect();
    for path in paths {
        for method in [
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ] {
            if table.iter().any(|r| r.path == path && r.method == method) {
                continue;
            }
            let (is_routed, status, body) = routed(&app, &method, path).await;
            assert!(
                !is_routed,
                "{method} {path} is routed but not listed: {status} {body}"
            );
            assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
            assert_eq!(body, json!({"message": "method not allowed on this route"}));
        }
    }
}

/// A route added with plain axum (`.route(...)` on the router, or on the
/// OpenApiRouter, which routes without documenting) would be answered but
/// missing from the document. Routes are only declared with
/// `.routes(routes!(...))` in crates/api/src/api; the console's static files, the one
/// exception, are declared from `ui::PATHS`, which `route_table` lists.
#[test]
fn routes_are_only_added_through_the_documented_router() {
    let mut sources = Vec::new();
    for tree in ["/src", "/crates"] {
        collect_rust_files(
            Path::new(&format!("{}{tree}", env!("CARGO_MANIFEST_DIR"))),
            &mut sources,
        );
    }
    let plain_routing = [
        ".route(",
        ".route_service(",
        ".nest(",
        ".nest_service(",
        ".fallback_service(",
    ];
    let mut console_routes = 0;
    for file in &sources {
        let text = std::fs::read_to_string(file).expect("source read");
        // Unit tests build routers of their own.
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        for needle in plain_routing {
            let count = text.matches(needle).count();
            if count == 0 {
                continue;
            }
            assert!(
                file.ends_with("crates/api/src/api/ui.rs") && needle == ".route(",
                "{}: {needle} adds a route the API document does not see; declare it with \
                 `.routes(routes!(handler))` and a #[utoipa::path] (crates/api/src/api/mod.rs)",
                file.display()
            );
            console_routes += count;
        }
    }
    let undocumented = route_table().iter().filter(|r| !r.documented).count();
    assert_eq!(
        console_routes, undocumented,
        "console routes: one per ui::PATHS entry"
    );
}

fn collect_rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            collect_rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[tokio::test]
async fn protected_operations_say_so_and_answer_401_without_a_token() {
    let app = TestApp::start().await;
    let doc = document(&app).await;
    let scheme = &doc["components"]["securitySchemes"][SECURITY_SCHEME];
    assert_eq!(
        (
            scheme["type"].clone(),
            scheme["in"].clone(),
            scheme["name"].clone()
        ),
        (json!("apiKey"), json!("header"), json!("authorization"))
    );
    for (method, path) in operations(&doc) {
        let operation = &doc["paths"][&path][method.to_lowercase()];
        let public = PUBLIC.contains(&(method.as_str(), path.as_str()));
        let security = operation.get("security").cloned().unwrap_or(json!([]));
        if public {
            assert_eq!(security, json!([]), "{method} {path} is public");
            continue;
        }
        // The host agents' and storage nodes' routes take a node
        // credential instead.
        let expected = if path.contains("/agent/") || path.starts_with("/nodes/{node}/storage") {
            json!([{ "node-credential": [] }])
        } else {
            json!([{ SECURITY_SCHEME: [] }])
        };
        assert_eq!(security, expected, "{method} {path}");
        assert!(
            operation["responses"].get("401").is_some(),
            "{method} {path}"
        );
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        let (status, body) = app
            .request(None, method.clone(), &concrete(&path), None)
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}: {body}");
    }
}

#[tokio::test]
async fn every_error_response_is_the_one_error_schema() {
    let app = TestApp::start().await;
    let doc = document(&app).await;
    let error_ref = json!({"$ref": "#/components/schemas/ErrorResponse"});
    assert_eq!(
        doc["components"]["schemas"]["ErrorResponse"]["properties"]["message"]["type"],
        "string"
    );
    for (method, path) in operations(&doc) {
        let responses = &doc["paths"][&path][method.to_lowercase()]["responses"];
        for (status, response) in responses.as_object().expect("responses") {
            if status.starts_with('2') {
                continue;
            }
            assert_eq!(
                response["content"]["application/json"]["schema"], error_ref,
                "{method} {path} {status}"
            );
        }
        let has_body = doc["paths"][&path][method.to_lowercase()]
            .get("requestBody")
            .is_some();
        if has_body {
            for status in ["400", "413"] {
                assert!(responses.get(status).is_some(), "{method} {path} {status}");
            }
        }
    }
    // The sign-in throttle answers 429 with Retry-After.
    for path in ["/signin", "/refresh"] {
        let throttled = &doc["paths"][path]["post"]["responses"]["429"];
        assert!(
            throttled["headers"].get("Retry-After").is_some(),
            "{path}: {throttled}"
        );
    }
}

#[tokio::test]
async fn the_document_names_fields_as_the_reference_does() {
    let app = TestApp::start().await;
    let doc = document(&app).await;
    let schemas = &doc["components"]["schemas"];
    let fields = |name: &str| -> BTreeSet<String> {
        schemas[name]["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("{name}"))
            .keys()
            .cloned()
            .collect()
    };
    for (schema, expected) in [
        (
            "SignInResponse",
            &[
                "AccessToken",
                "IdToken",
                "RefreshToken",
                "ExpiresIn",
                "TokenType",
            ][..],
        ),
        ("VersionResponse", &["version", "componentName"][..]),
        ("ErrorResponse", &["message"][..]),
        (
            "Job",
            &[
                "id",
                "type",
                "object",
                "args",
                "state",
                "status",
                "progress",
                "starttime",
                "endtime",
                "username",
                "useremail",
                "details",
            ][..],
        ),
        (
            "Volume",
            &[
                "name",
                "volumeid",
                "type",
                "size",
                "maxsize",
                "policy",
                "zone",
                "state",
                "status",
                "progress",
                "capacitygroup",
                "allowdatamovement",
                "flavor",
            ][..],
        ),
        (
            "Policy",
            &[
                "name",
                "resiliencymedia",
                "resiliencynode",
                "resiliencyzone",
                "capacityoptimization",
                "createdbyuserName",
                "updatebyUseremail",
            ][..],
        ),
    ] {
        let have = fields(schema);
        for field in expected {
            assert!(have.contains(*field), "{schema}.{field} in {have:?}");
        }
    }
}

/// Issue 30: `OPTIONS` on every route answers 204 with an `Allow` header
/// naming exactly the methods the router really answers there (probed one
/// by one; `OPTIONS` itself, answered on every route, is not listed).
#[tokio::test]
async fn options_advertise_exactly_the_methods_each_route_answers() {
    let app = TestApp::start().await;
    let paths: BTreeSet<String> = route_table().into_iter().map(|r| r.path).collect();
    for path in &paths {
        let url = format!("{}{}", app.base, concrete(path));
        let response = app
            .client
            .request(Method::OPTIONS, &url)
            .send()
            .await
            .expect("OPTIONS sent");
        assert_eq!(response.status(), StatusCode::NO_CONTENT, "OPTIONS {path}");
        let allow: BTreeSet<String> = response
            .headers()
            .get("allow")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .split(',')
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty())
            .collect();
        let mut answered = BTreeSet::new();
        for method in [
            Method::GET,
            Method::HEAD,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
            Method::TRACE,
        ] {
            // Every path here matches a route, so only 405 means "not served".
            let status = app
                .client
                .request(method.clone(), &url)
                .send()
                .await
                .expect("request sent")
                .status();
            if status != StatusCode::METHOD_NOT_ALLOWED {
                answered.insert(method.to_string());
            }
        }
        assert_eq!(allow, answered, "Allow of {path}");
        // And the route table (the document) agrees, HEAD going with GET.
        let mut listed: BTreeSet<String> = route_table()
            .into_iter()
            .filter(|r| &r.path == path)
            .map(|r| r.method.to_string())
            .collect();
        if listed.contains("GET") {
            listed.insert("HEAD".into());
        }
        assert_eq!(allow, listed, "{path}");
    }
    // An unknown path is still 404, not an empty Allow.
    let response = app
        .client
        .request(Method::OPTIONS, format!("{}/no/such/route", app.base))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

/// Issue 30: the document says no more than the server accepts: fields
/// that refuse null are not nullable, required strings are non-empty, node
/// addresses are IP addresses.
#[tokio::test]
async fn the_document_marks_only_fields_that_take_null_as_nullable() {
    let app = TestApp::start().await;
    let doc = document(&app).await;
    let schemas = &doc["components"]["schemas"];
    let property = |schema: &str, field: &str| schemas[schema]["properties"][field].clone();
    for (schema, field, kind) in [
        ("MediaModify", "state", "string"),
        ("MediaModify", "size", "integer"),
        ("UserModify", "disabled", "boolean"),
        ("UserModify", "admin", "boolean"),
        ("UserCreate", "tenant", "string"),
        ("UserCreate", "name", "string"),
        ("UserCreate", "admin", "boolean"),
        ("AttachmentCreate", "manager", "string"),
    ] {
        let p = property(schema, field);
        assert_eq!(p["type"], kind, "{schema}.{field}: {p}");
        assert!(
            !schemas[schema]["required"]
                .as_array()
                .is_some_and(|r| r.contains(&json!(field))),
            "{schema}.{field} stays optional"
        );
    }
    // And the server refuses null for each of them.
    app.create_policy("p", 0, 0, 0).await;
    app.create_volume("v", 1, "p").await;
    for (method, path, body) in [
        (Method::PATCH, "/media/node-a-m1", json!({"state": null})),
        (Method::PATCH, "/users/1", json!({"disabled": null})),
        (
            Method::POST,
            "/users",
            json!({"email": "n@x.example", "password": "password1", "tenant": null}),
        ),
        (
            Method::POST,
            "/volumes/v/snapshots/top/attachments",
            json!({"node": "node-a", "manager": null}),
        ),
    ] {
        let (status, answer) = app
            .request(Some(&app.token), method.clone(), path, Some(body.clone()))
            .await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{method} {path} {body}: {answer}"
        );
    }
    // Still nullable where null is taken (it means "not sent" or "clear").
    assert_eq!(
        property("HostReport", "device")["type"],
        json!(["string", "null"])
    );
    assert_eq!(property("MediaCreate", "media")["minLength"], 1);
    let ip = |schema: &str| {
        let p = property(schema, "address");
        let formats: Vec<Value> = p["anyOf"]
            .as_array()
            .unwrap_or_else(|| panic!("{schema}.address: {p}"))
            .iter()
            .map(|a| json!([a["type"], a["format"], a["minLength"], a["maxLength"]]))
            .collect();
        formats
    };
    assert_eq!(
        ip("NodeCreate"),
        [
            json!(["string", "ipv4", 1, null]),
            json!(["string", "ipv6", 1, null])
        ]
    );
    assert_eq!(
        ip("NodeModify"),
        [
            json!(["string", "ipv4", 1, null]),
            json!(["string", "ipv6", 1, null]),
            json!(["string", null, null, 0])
        ]
    );
}
