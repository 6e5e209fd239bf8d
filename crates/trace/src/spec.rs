//! Where a trace comes from, as a sweep or experiment file names it: a
//! synthetic preset with parameter overrides, or a trace file.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::formats::{self, Format};
use crate::request::BlockTrace;
use crate::synth::SynthSpec;

/// One trace named in a file: a synthetic preset (`tiermux trace generate
/// --preset`) with generator parameters over the preset's, or a trace
/// file in any format `tiermux trace` reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSource {
    /// The name results show (default: the preset's name or the file's).
    #[serde(default)]
    pub label: Option<String>,
    /// A synthetic preset.
    #[serde(default)]
    pub preset: Option<String>,
    /// Generator parameters over the preset's (`--set`).
    #[serde(default)]
    pub set: toml::Table,
    /// A trace file, relative to the file that names it.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// The file's format (default: from its name).
    #[serde(default)]
    pub format: Option<String>,
    /// Page size in bytes (default 4096).
    #[serde(default)]
    pub page_bytes: Option<u64>,
}

/// A TOML value as `--set` takes it: strings bare, others as written.
pub fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl TraceSource {
    /// The name results show.
    pub fn label(&self) -> String {
        let file = || {
            self.path
                .as_ref()
                .and_then(|p| p.file_name())
                .map(|f| f.to_string_lossy().into_owned())
        };
        self.label
            .clone()
            .or_else(|| self.preset.clone())
            .or_else(file)
            .unwrap_or_default()
    }

    /// The page size, checked.
    pub fn page_bytes(&self) -> Result<u64> {
        match self.page_bytes.unwrap_or(4096) {
            0 => bail!("page_bytes must be at least 1"),
            b => Ok(b),
        }
    }

    /// Checks what can be checked without reading a file: exactly one of
    /// `preset` and `path`, `set` only with a preset, and the preset's
    /// parameters.
    pub fn check(&self) -> Result<()> {
        match (&self.preset, &self.path) {
            (Some(preset), None) => {
                self.synth_spec(preset)?;
                Ok(())
            }
            (None, Some(_)) if !self.set.is_empty() => bail!("'set' applies to presets only"),
            (None, Some(_)) => {
                self.page_bytes()?;
                Ok(())
            }
            _ => bail!("give exactly one of 'preset' and 'path'"),
        }
    }

    /// The generator's parameters for a preset, checked.
    fn synth_spec(&self, preset: &str) -> Result<SynthSpec> {
        let mut spec = SynthSpec::preset(preset)?;
        for (k, v) in &self.set {
            spec.set(k, &value_text(v))?;
        }
        spec.page_bytes = self.page_bytes()?;
        spec.validate()?;
        Ok(spec)
    }

    /// The file's path: as given when absolute, else under `base`.
    pub fn resolved_path(&self, base: &Path) -> Option<PathBuf> {
        self.path.as_ref().map(|p| base.join(p))
    }

    /// Generates or reads the trace (a file named relative to `base`);
    /// returns it with its page size.
    pub fn load(&self, base: &Path) -> Result<(BlockTrace, u64)> {
        self.check()?;
        let page_bytes = self.page_bytes()?;
        if let Some(preset) = &self.preset {
            return Ok((self.synth_spec(preset)?.generate()?, page_bytes));
        }
        let path = self.resolved_path(base).expect("checked: a path");
        let format = Format::resolve(self.format.as_deref(), &path)?;
        let trace =
            formats::read(&path, &format).with_context(|| format!("trace '{}'", self.label()))?;
        Ok((trace, page_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_names_one_trace() {
        let both = TraceSource {
            preset: Some("ts_0".into()),
            path: Some("x.csv".into()),
            ..TraceSource::default()
        };
        assert!(format!("{}", both.check().unwrap_err()).contains("exactly one"));
        assert!(TraceSource::default().check().is_err());
        let mut set = toml::Table::new();
        set.insert("requests".into(), toml::Value::Integer(10));
        let file = TraceSource {
            path: Some("x.csv".into()),
            set,
            ..TraceSource::default()
        };
        assert!(format!("{}", file.check().unwrap_err()).contains("presets only"));
        let unknown = TraceSource {
            preset: Some("no-such".into()),
            ..TraceSource::default()
        };
        assert!(unknown.check().is_err());
    }

    #[test]
    fn a_preset_generates_with_its_overrides() {
        let mut set = toml::Table::new();
        set.insert("requests".into(), toml::Value::Integer(500));
        let s = TraceSource {
            preset: Some("ts_0".into()),
            set,
            ..TraceSource::default()
        };
        let (t, page_bytes) = s.load(Path::new(".")).unwrap();
        assert_eq!((t.requests.len(), page_bytes), (500, 4096));
        assert_eq!(s.label(), "ts_0");
    }
}
