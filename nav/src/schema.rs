//! Argument schemas of the navigation tools: one table per tool drives both
//! the advertised JSON Schema (`additionalProperties: false` everywhere) and
//! the validation, so the two cannot drift apart.

use serde_json::{Map, Value, json};

use crate::limits::shown;

/// Unknown argument names listed in one error.
const MAX_LISTED_KEYS: usize = 10;

/// The JSON type of one argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Str,
    Int,
    Bool,
}

/// One argument of a tool.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub kind: Kind,
    pub required: bool,
    /// `null` is accepted (and means "not given").
    pub nullable: bool,
    pub min: Option<i64>,
    pub max: Option<i64>,
    /// Characters, for strings.
    pub min_len: Option<usize>,
    pub max_len: Option<usize>,
    pub choices: &'static [&'static str],
    pub default: Option<&'static str>,
    pub description: &'static str,
}

impl Param {
    pub const fn new(name: &'static str, kind: Kind, description: &'static str) -> Self {
        Param {
            name,
            kind,
            required: false,
            nullable: true,
            min: None,
            max: None,
            min_len: None,
            max_len: None,
            choices: &[],
            default: None,
            description,
        }
    }
    pub const fn required(mut self) -> Self {
        self.required = true;
        self.nullable = false;
        self
    }
    pub const fn not_null(mut self) -> Self {
        self.nullable = false;
        self
    }
    pub const fn range(mut self, min: i64, max: Option<i64>) -> Self {
        self.min = Some(min);
        self.max = max;
        self
    }
    pub const fn len(mut self, min: usize, max: Option<usize>) -> Self {
        self.min_len = Some(min);
        self.max_len = max;
        self
    }
    pub const fn choices(mut self, choices: &'static [&'static str]) -> Self {
        self.choices = choices;
        self
    }
    pub const fn default(mut self, value: &'static str) -> Self {
        self.default = Some(value);
        self
    }

    fn json_schema(&self) -> Value {
        let base = match self.kind {
            Kind::Str => "string",
            Kind::Int => "integer",
            Kind::Bool => "boolean",
        };
        let mut obj = Map::new();
        obj.insert("type".into(), if self.nullable { json!([base, "null"]) } else { json!(base) });
        obj.insert("description".into(), json!(self.description));
        if let Some(d) = self.default {
            obj.insert("default".into(), serde_json::from_str(d).unwrap_or(Value::Null));
        }
        if let Some(m) = self.min {
            obj.insert("minimum".into(), json!(m));
        }
        if let Some(m) = self.max {
            obj.insert("maximum".into(), json!(m));
        }
        if let Some(m) = self.min_len {
            obj.insert("minLength".into(), json!(m));
        }
        if let Some(m) = self.max_len {
            obj.insert("maxLength".into(), json!(m));
        }
        if !self.choices.is_empty() {
            let mut values: Vec<Value> = self.choices.iter().map(|c| json!(c)).collect();
            if self.nullable {
                values.push(Value::Null);
            }
            obj.insert("enum".into(), Value::Array(values));
        }
        Value::Object(obj)
    }
}

/// A tool's advertised definition.
#[derive(Debug, Clone, Copy)]
pub struct ToolDef {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub params: &'static [Param],
    pub read_only: bool,
}

impl ToolDef {
    /// The `inputSchema` object.
    pub fn input_schema(&self) -> Value {
        let mut props = Map::new();
        for p in self.params {
            props.insert(p.name.into(), p.json_schema());
        }
        let required: Vec<&str> = self.params.iter().filter(|p| p.required).map(|p| p.name).collect();
        json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
    }

    /// The `tools/list` entry.
    pub fn definition(&self) -> Value {
        json!({
            "annotations": {
                "destructiveHint": false,
                "idempotentHint": self.read_only,
                "openWorldHint": !self.read_only,
                "readOnlyHint": self.read_only,
            },
            "description": self.description,
            "inputSchema": self.input_schema(),
            "name": self.name,
            "title": self.title,
        })
    }

    /// Checks `arguments` against the table; the error is the tool-error text
    /// `Invalid arguments for '<tool>': <detail>`.
    pub fn validate(&self, arguments: Option<&Value>) -> Result<Args, String> {
        let fail = |detail: String| format!("Invalid arguments for '{}': {detail}", self.name);
        let empty = Map::new();
        let obj = match arguments {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(o)) => o,
            Some(_) => return Err(fail("arguments must be an object".into())),
        };
        let mut unknown: Vec<&str> =
            obj.keys().map(String::as_str).filter(|k| !self.params.iter().any(|p| p.name == *k)).collect();
        if !unknown.is_empty() {
            unknown.sort_unstable();
            let more = unknown.len().saturating_sub(MAX_LISTED_KEYS);
            let mut list =
                unknown.iter().take(MAX_LISTED_KEYS).map(|k| format!("'{}'", shown(k))).collect::<Vec<_>>().join(", ");
            if more > 0 {
                list.push_str(&format!(" and {more} more"));
            }
            return Err(fail(format!("unexpected argument {list} (additional properties are not allowed)")));
        }
        let mut out = Map::new();
        for p in self.params {
            let value = obj.get(p.name);
            match value {
                None | Some(Value::Null) => {
                    if p.required {
                        return Err(fail(format!("{} is required", p.name)));
                    }
                    if value.is_some() && !p.nullable {
                        return Err(fail(format!("{} must not be null", p.name)));
                    }
                    if let Some(d) = p.default {
                        out.insert(p.name.into(), serde_json::from_str(d).unwrap_or(Value::Null));
                    }
                }
                Some(v) => {
                    check(p, v).map_err(fail)?;
                    out.insert(p.name.into(), v.clone());
                }
            }
        }
        Ok(Args(out))
    }
}

fn check(p: &Param, v: &Value) -> Result<(), String> {
    match p.kind {
        Kind::Str => {
            let s = v.as_str().ok_or_else(|| format!("{} must be a string", p.name))?;
            let chars = s.chars().count();
            if let Some(min) = p.min_len
                && chars < min
            {
                return Err(format!("{} must be at least {min} character{}", p.name, if min == 1 { "" } else { "s" }));
            }
            if let Some(max) = p.max_len
                && chars > max
            {
                return Err(format!("{} must be at most {max} characters", p.name));
            }
            if !p.choices.is_empty() && !p.choices.contains(&s) {
                return Err(format!("{} must be one of {}", p.name, p.choices.join(", ")));
            }
        }
        Kind::Int => {
            let n = v
                .as_i64()
                .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18).map(|f| f as i64))
                .ok_or_else(|| format!("{} must be an integer", p.name))?;
            if let Some(min) = p.min
                && n < min
            {
                return Err(match p.max {
                    Some(max) => format!("{} must be between {min} and {max}", p.name),
                    None => format!("{} must be {min} or more", p.name),
                });
            }
            if let Some(max) = p.max
                && n > max
            {
                return Err(format!("{} must be between {} and {max}", p.name, p.min.unwrap_or(0)));
            }
        }
        Kind::Bool => {
            if !v.is_boolean() {
                return Err(format!("{} must be a boolean", p.name));
            }
        }
    }
    Ok(())
}

/// Validated arguments, defaults filled in.
#[derive(Debug, Clone, Default)]
pub struct Args(pub Map<String, Value>);

impl Args {
    pub fn str(&self, name: &str) -> Option<String> {
        self.0.get(name).and_then(Value::as_str).map(str::to_owned)
    }
    pub fn int(&self, name: &str) -> Option<i64> {
        self.0.get(name).and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
    }
    pub fn bool(&self, name: &str) -> bool {
        self.0.get(name).and_then(Value::as_bool).unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: ToolDef = ToolDef {
        name: "t",
        title: "T",
        description: "d",
        params: &[
            Param::new("q", Kind::Str, "q").required().len(1, Some(3)),
            Param::new("n", Kind::Int, "n").not_null().range(1, Some(5)).default("2"),
            Param::new("e", Kind::Str, "e").choices(&["a", "b"]),
        ],
        read_only: true,
    };

    #[test]
    fn validation() {
        let ok = T.validate(Some(&json!({"q": "x"}))).unwrap();
        assert_eq!(ok.int("n"), Some(2));
        assert_eq!(T.validate(None).unwrap_err(), "Invalid arguments for 't': q is required");
        assert_eq!(
            T.validate(Some(&json!({"q": "x", "z": 1}))).unwrap_err(),
            "Invalid arguments for 't': unexpected argument 'z' (additional properties are not allowed)"
        );
        assert_eq!(
            T.validate(Some(&json!({"q": "x", "n": 9}))).unwrap_err(),
            "Invalid arguments for 't': n must be between 1 and 5"
        );
        assert_eq!(
            T.validate(Some(&json!({"q": "x", "n": null}))).unwrap_err(),
            "Invalid arguments for 't': n must not be null"
        );
        assert_eq!(
            T.validate(Some(&json!({"q": "x", "e": "c"}))).unwrap_err(),
            "Invalid arguments for 't': e must be one of a, b"
        );
        assert_eq!(
            T.validate(Some(&json!({"q": ""}))).unwrap_err(),
            "Invalid arguments for 't': q must be at least 1 character"
        );
        assert_eq!(T.input_schema()["additionalProperties"], json!(false));
    }
}
