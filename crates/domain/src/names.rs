//! Enums whose variants go by fixed names (in the API, the store, the
//! configuration): one table gives both directions.

/// `svs_names!(Type { Variant = "name", ... })` gives `Type::ALL` (the
/// table's order), `Type::as_str` and `Type::parse` (that exact name, else
/// `None`). `svs_names!(setting "key", Type { ... })` also reads and writes
/// it as the value of setting `key` (`TryFrom<String>`, for
/// `#[serde(try_from = "String", into = "String")]`), refusing any other
/// name with `key 'name' is not supported (supported: a, b)`.
#[macro_export]
macro_rules! svs_names {
    ($ty:ident { $($variant:ident = $name:literal),+ $(,)? }) => {
        #[allow(dead_code)]
        impl $ty {
            /// Every variant, in the table's order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The variant's name.
            pub fn as_str(&self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }

            /// The variant of that exact name.
            pub fn parse(s: &str) -> Option<$ty> {
                match s {
                    $($name => Some($ty::$variant),)+
                    _ => None,
                }
            }
        }
    };
    (setting $key:literal, $ty:ident { $($variant:ident = $name:literal),+ $(,)? }) => {
        $crate::svs_names!($ty { $($variant = $name),+ });

        impl TryFrom<String> for $ty {
            type Error = String;

            fn try_from(name: String) -> Result<$ty, String> {
                $ty::parse(&name).ok_or_else(|| {
                    let supported: &[&str] = &[$($name),+];
                    format!(
                        "{} '{name}' is not supported (supported: {})",
                        $key,
                        supported.join(", ")
                    )
                })
            }
        }

        impl From<$ty> for String {
            fn from(value: $ty) -> String {
                value.as_str().to_string()
            }
        }
    };
}

#[cfg(test)]
mod tests {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Mode {
        Off,
        On,
    }

    crate::svs_names!(setting "mode", Mode {
        Off = "off",
        On = "on",
    });

    #[test]
    fn every_name_reads_back_as_its_variant_and_no_other_name_does() {
        for mode in Mode::ALL {
            assert_eq!(Mode::parse(mode.as_str()), Some(*mode));
        }
        assert_eq!(Mode::ALL, &[Mode::Off, Mode::On]);
        assert_eq!(Mode::parse("On"), None);
        assert_eq!(Mode::parse(""), None);
    }

    #[test]
    fn a_setting_refuses_another_name_listing_the_names_it_takes() {
        assert_eq!(Mode::try_from("on".to_string()), Ok(Mode::On));
        assert_eq!(String::from(Mode::Off), "off");
        assert_eq!(
            Mode::try_from("maybe".to_string()),
            Err("mode 'maybe' is not supported (supported: off, on)".to_string())
        );
    }
}
