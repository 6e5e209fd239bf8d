//! Named policy parameters with validation that names the offending field.
//!
//! Configuration files (TOML in the simulator and the engine) and the
//! command line turn into a [`Params`] table; a policy reads its fields with
//! typed getters and the registry rejects any field the policy never read.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One parameter value.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamValue {
    /// true / false.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A real number.
    Float(f64),
    /// A string.
    Str(String),
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Bool(b) => write!(f, "{b}"),
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::Float(x) => write!(f, "{x}"),
            ParamValue::Str(s) => write!(f, "\"{s}\""),
        }
    }
}

impl<'de> serde::Deserialize<'de> for ParamValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ParamValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number, boolean or string")
            }
            fn visit_bool<E>(self, b: bool) -> Result<ParamValue, E> {
                Ok(ParamValue::Bool(b))
            }
            fn visit_i64<E>(self, i: i64) -> Result<ParamValue, E> {
                Ok(ParamValue::Int(i))
            }
            fn visit_u64<E: serde::de::Error>(self, u: u64) -> Result<ParamValue, E> {
                i64::try_from(u)
                    .map(ParamValue::Int)
                    .map_err(|_| E::custom(format!("integer {u} is too large")))
            }
            fn visit_f64<E>(self, x: f64) -> Result<ParamValue, E> {
                Ok(ParamValue::Float(x))
            }
            fn visit_str<E>(self, s: &str) -> Result<ParamValue, E> {
                Ok(ParamValue::Str(s.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// Reads a table of parameters from any serde format (TOML, JSON); a value
/// that is not a number, boolean or string is an error naming its key.
impl<'de> serde::Deserialize<'de> for Params {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Params;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of parameters")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Params, A::Error> {
                let mut p = Params::new();
                while let Some(key) = m.next_key::<String>()? {
                    let value = m.next_value::<ParamValue>().map_err(|e| {
                        <A::Error as serde::de::Error>::custom(format!("parameter '{key}': {e}"))
                    })?;
                    p.set(&key, value);
                }
                Ok(p)
            }
        }
        d.deserialize_map(V)
    }
}

/// A parameter problem: which field and why.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("parameter '{field}': {message}")]
pub struct ParamError {
    /// The parameter's name.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl ParamError {
    /// A new error about `field`.
    pub fn new(field: &str, message: impl Into<String>) -> Self {
        ParamError {
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// A table of named parameters that remembers which names were read.
#[derive(Clone, Debug, Default)]
pub struct Params {
    values: BTreeMap<String, ParamValue>,
    used: RefCell<BTreeSet<String>>,
}

/// `v` as an error message shows it: in scientific notation when very
/// large or very small, so that 1e300 is not printed with 300 digits.
pub fn shown(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-6..1e15).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

impl Params {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `name` to `value` (builder style).
    pub fn with(mut self, name: &str, value: ParamValue) -> Self {
        self.values.insert(name.to_string(), value);
        self
    }

    /// Sets `name` to `value`.
    pub fn set(&mut self, name: &str, value: ParamValue) {
        self.values.insert(name.to_string(), value);
    }

    /// The raw value of `name`, marking it used.
    pub fn get(&self, name: &str) -> Option<&ParamValue> {
        self.used.borrow_mut().insert(name.to_string());
        self.values.get(name)
    }

    /// Every name and value, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &ParamValue)> {
        self.values.iter()
    }

    /// A real number in `[min, max]`, or `default` when absent.
    pub fn f64_in(&self, name: &str, default: f64, min: f64, max: f64) -> Result<f64, ParamError> {
        let v = match self.get(name) {
            None => return Ok(default),
            Some(ParamValue::Float(x)) => *x,
            Some(ParamValue::Int(i)) => *i as f64,
            Some(other) => {
                return Err(ParamError::new(
                    name,
                    format!("expected a number, got {other}"),
                ))
            }
        };
        if !v.is_finite() || v < min || v > max {
            return Err(ParamError::new(
                name,
                format!("must be in [{min}, {max}], got {}", shown(v)),
            ));
        }
        Ok(v)
    }

    /// An integer in `[min, max]`, or `default` when absent.
    pub fn u64_in(&self, name: &str, default: u64, min: u64, max: u64) -> Result<u64, ParamError> {
        let v = match self.get(name) {
            None => return Ok(default),
            Some(ParamValue::Int(i)) => *i,
            // A whole float past i64 would saturate: it is out of range.
            Some(ParamValue::Float(x)) if x.fract() == 0.0 && x.abs() < 9e18 => *x as i64,
            Some(ParamValue::Float(x)) if x.fract() == 0.0 => {
                return Err(ParamError::new(
                    name,
                    format!("must be in [{min}, {max}], got {}", shown(*x)),
                ))
            }
            Some(other) => {
                return Err(ParamError::new(
                    name,
                    format!("expected an integer, got {other}"),
                ))
            }
        };
        if v < min as i64 || (v as u64) > max {
            return Err(ParamError::new(
                name,
                format!("must be in [{min}, {max}], got {v}"),
            ));
        }
        Ok(v as u64)
    }

    /// A boolean, or `default` when absent.
    pub fn bool(&self, name: &str, default: bool) -> Result<bool, ParamError> {
        match self.get(name) {
            None => Ok(default),
            Some(ParamValue::Bool(b)) => Ok(*b),
            Some(other) => Err(ParamError::new(
                name,
                format!("expected true or false, got {other}"),
            )),
        }
    }

    /// One of `choices`, or `default` when absent.
    pub fn choice(
        &self,
        name: &str,
        default: &str,
        choices: &[&str],
    ) -> Result<String, ParamError> {
        match self.get(name) {
            None => Ok(default.to_string()),
            Some(ParamValue::Str(s)) if choices.contains(&s.as_str()) => Ok(s.clone()),
            Some(other) => Err(ParamError::new(
                name,
                format!("expected one of {}, got {other}", choices.join(", ")),
            )),
        }
    }

    /// Every name read so far, set or not, in order: the parameters a
    /// policy built from this table takes (`tiermux policies` lists them).
    pub fn read_names(&self) -> Vec<String> {
        self.used.borrow().iter().cloned().collect()
    }

    /// Fails on the first parameter nobody read (a misspelled name).
    pub fn reject_unused(&self, known_hint: &str) -> Result<(), ParamError> {
        let used = self.used.borrow();
        for name in self.values.keys() {
            if !used.contains(name) {
                return Err(ParamError::new(
                    name,
                    format!("unknown parameter ({known_hint})"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deserializes_from_toml_and_names_a_bad_key() {
        let p: Params = toml::from_str("a = 1\nb = 2.5\nc = \"lru\"\nd = true").unwrap();
        assert_eq!(p.u64_in("a", 0, 0, 9), Ok(1));
        assert_eq!(p.f64_in("b", 0.0, 0.0, 9.0), Ok(2.5));
        assert_eq!(p.get("c"), Some(&ParamValue::Str("lru".into())));
        assert_eq!(p.bool("d", false), Ok(true));
        let e = toml::from_str::<Params>("ok = 1\nlist = [1, 2]").unwrap_err();
        assert!(e.message().contains("parameter 'list'"), "{e}");
        assert!(e.message().contains("a number, boolean or string"), "{e}");
    }

    #[test]
    fn typed_getters_validate_and_name_the_field() {
        let p = Params::new()
            .with("rate", ParamValue::Float(1.5))
            .with("n", ParamValue::Int(-3))
            .with("mode", ParamValue::Str("zz".into()));
        let e = p.f64_in("rate", 0.5, 0.0, 1.0).unwrap_err();
        assert_eq!(e.field, "rate");
        assert!(e.to_string().contains("[0, 1]"), "{e}");
        assert!(p.u64_in("n", 1, 0, 10).is_err());
        assert!(p.choice("mode", "a", &["a", "b"]).is_err());
        assert_eq!(p.f64_in("absent", 0.25, 0.0, 1.0).unwrap(), 0.25);
        let q = Params::new().with("typo", ParamValue::Bool(true));
        assert_eq!(q.reject_unused("x").unwrap_err().field, "typo");
    }

    #[test]
    fn a_whole_float_past_every_integer_is_out_of_range_as_written() {
        let p = Params::new().with("n", ParamValue::Float(1e300));
        // It used to saturate to i64::MAX, which an unbounded getter took.
        let e = p.u64_in("n", 1, 0, u64::MAX).unwrap_err();
        assert!(e.to_string().contains("got 1e300"), "{e}");
        let e = p.f64_in("n", 1.0, 0.0, 1.0).unwrap_err();
        assert!(e.to_string().contains("got 1e300"), "{e}");
        let q = Params::new().with("n", ParamValue::Float(4096.0));
        assert_eq!(q.u64_in("n", 1, 0, u64::MAX), Ok(4096));
    }
}
