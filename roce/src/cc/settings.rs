//! Setting one key of an algorithm's settings table from its text, as
//! `--cc-param KEY=VALUE` gives it: the one parser behind
//! [`super::SwiftSettings::set`] and [`super::TimelySettings::set`].

/// Set `key` of a settings table `t` (whose keys are `keys`; `what` names
/// the algorithm in errors) from its text: a number where the table holds
/// a number, else the text itself (durations and rates with their unit).
/// The table is otherwise unchanged; the error names the key and what was
/// expected.
pub(super) fn set_key<T>(
    t: &mut T,
    what: &str,
    keys: &[&str],
    key: &str,
    value: &str,
) -> Result<(), String>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    if !keys.contains(&key) {
        return Err(format!(
            "unknown {what} parameter {key:?}: expected one of {}",
            keys.join(", ")
        ));
    }
    let mut obj = match serde_json::to_value(&*t) {
        Ok(serde_json::Value::Object(o)) => o,
        _ => return Err(format!("{what} settings are not a table")),
    };
    let v = value.trim();
    let json = match (obj.get(key), serde_json::from_str::<serde_json::Value>(v)) {
        (Some(serde_json::Value::Number(_)), Ok(n @ serde_json::Value::Number(_))) => n,
        _ => serde_json::Value::String(v.to_string()),
    };
    obj.insert(key.to_string(), json);
    *t = serde_json::from_value(serde_json::Value::Object(obj))
        .map_err(|e| format!("{key} = {value:?}: {e}"))?;
    Ok(())
}
