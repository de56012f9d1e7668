//! perftest's `--out_json` report (`--out_json --out_json_file=F`), read
//! into the same records as its text output ([`PerftestReport`]).
//!
//! Accepted shapes: Debian's perftest 4.5 and `rocelab perftest
//! --out_json` write keys and words unquoted with trailing commas
//! (`test: RDMA_Write_BW_Test,`, `TX_depth : 128,`); perftest 6.x quotes
//! keys and strings (`"MsgSize": 65536,`) and may leave one key bare
//! (`sl: 0,`). A file holds one object (`test_info`, `results`, and in
//! rocelab's report `counters_seconds` and `counters`: the device's
//! counter delta over the run, read as the text output's counter block)
//! or a sequence of them (concatenated
//! reports, or one object per message size); `results` is one object or
//! an array of them. An object with `results` and no `test_info`
//! continues the run before it.
//!
//! `results` fields: bandwidth tests `MsgSize`, `n_iterations`,
//! `BW_peak`, `BW_average`, `MsgRate` (and `sl`); latency tests `t_min`,
//! `t_max`, `t_typical`, `t_avg`, `t_stdev`, `percentile_99`,
//! `percentile_99.9`; duration-mode latency `t_avg` and `tps_average`.
//! The report does not say its bandwidth unit: it is read as perftest's
//! default `MB/sec` (MiB/s), which is what a run without
//! `--report_gbits` writes. Units then follow the text parser (bit/s,
//! messages/s, nanoseconds).
//!
//! Errors name the line, the key path (`results.BW_peak`) and what was
//! expected there.

use std::collections::BTreeMap;

use super::perftest::{
    BwRow, CounterBlock, LatDurationRow, LatRow, PerftestReport, PerftestRun, Side, TestKind,
};
use super::text::{scaled_decimal, ParseError};

/// Whether `input` looks like a perftest `--out_json` report: it opens
/// with `{` or `[` and has a `test_info` or `results` key.
pub fn looks_like(input: &str) -> bool {
    let t = input.trim_start();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return false;
    }
    input.lines().any(|l| {
        let k = l.trim().trim_start_matches('{').trim_start();
        ["test_info", "\"test_info\"", "results", "\"results\""]
            .iter()
            .any(|key| {
                k.strip_prefix(key)
                    .is_some_and(|rest| rest.trim_start().starts_with(':'))
            })
    })
}

/// A value of the report, with the line it starts on.
#[derive(Debug, Clone)]
struct Node {
    line: usize,
    value: Value,
}

#[derive(Debug, Clone)]
enum Value {
    /// Keys in order, with their values.
    Object(Vec<(String, Node)>),
    Array(Vec<Node>),
    /// A string, number or bare word, as written (quotes removed).
    Scalar(String),
}

/// The reader: a cursor over the text that counts lines.
struct Reader<'a> {
    s: &'a [u8],
    at: usize,
    line: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn bump(&mut self) {
        if self.peek() == Some(b'\n') {
            self.line += 1;
        }
        self.at += 1;
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.bump();
        }
    }

    /// The rest of the current line (for an error's `found`).
    fn here(&self) -> String {
        let rest = &self.s[self.at.min(self.s.len())..];
        let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        String::from_utf8_lossy(&rest[..end]).into_owned()
    }

    fn err(&self, path: &str, expected: &str) -> ParseError {
        let what = if path.is_empty() {
            expected.to_string()
        } else {
            format!("{expected} (at {path})")
        };
        let found = if self.at >= self.s.len() {
            "the end of the file".to_string()
        } else {
            self.here()
        };
        ParseError::new(self.line, what, &found)
    }

    fn quoted(&mut self, path: &str) -> Result<String, ParseError> {
        let line = self.line;
        self.bump();
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None | Some(b'\n') => {
                    return Err(ParseError::new(
                        line,
                        format!("a closing '\"' (at {path})"),
                        &self.here(),
                    ))
                }
                Some(b'"') => {
                    self.bump();
                    return Ok(String::from_utf8_lossy(&out).into_owned());
                }
                Some(b'\\') => {
                    self.bump();
                    if let Some(c) = self.peek() {
                        out.push(c);
                        self.bump();
                    }
                }
                Some(c) => {
                    out.push(c);
                    self.bump();
                }
            }
        }
    }

    /// A bare word or number: up to `stop` or the end of the line.
    fn bare(&mut self, stop: &[u8]) -> String {
        let start = self.at;
        while let Some(c) = self.peek() {
            if c == b'\n' || stop.contains(&c) {
                break;
            }
            self.bump();
        }
        String::from_utf8_lossy(&self.s[start..self.at])
            .trim()
            .to_string()
    }

    fn value(&mut self, path: &str, depth: usize) -> Result<Node, ParseError> {
        if depth > 16 {
            return Err(self.err(path, "at most 16 levels of nesting"));
        }
        self.skip_ws();
        let line = self.line;
        let value = match self.peek() {
            Some(b'{') => self.object(path, depth)?,
            Some(b'[') => self.array(path, depth)?,
            Some(b'"') => Value::Scalar(self.quoted(path)?),
            Some(b',' | b'}' | b']') | None => return Err(self.err(path, "a value")),
            Some(_) => Value::Scalar(self.bare(b",}]")),
        };
        Ok(Node { line, value })
    }

    fn object(&mut self, path: &str, depth: usize) -> Result<Value, ParseError> {
        self.bump();
        let mut members = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b'}') => {
                    self.bump();
                    return Ok(Value::Object(members));
                }
                Some(b',') => {
                    self.bump();
                    continue;
                }
                None => return Err(self.err(path, "a key or the object's closing '}'")),
                _ => {}
            }
            let key = if self.peek() == Some(b'"') {
                self.quoted(path)?
            } else {
                self.bare(b":{}[],\"")
            };
            self.skip_ws();
            if key.is_empty() || self.peek() != Some(b':') {
                return Err(self.err(path, "a key and ':'"));
            }
            self.bump();
            let sub = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            let node = self.value(&sub, depth + 1)?;
            members.push((key, node));
        }
    }

    fn array(&mut self, path: &str, depth: usize) -> Result<Value, ParseError> {
        self.bump();
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b']') => {
                    self.bump();
                    return Ok(Value::Array(items));
                }
                Some(b',') => {
                    self.bump();
                    continue;
                }
                None => return Err(self.err(path, "an item or the array's closing ']'")),
                _ => {}
            }
            let sub = format!("{path}[{}]", items.len());
            items.push(self.value(&sub, depth + 1)?);
        }
    }
}

/// The top-level objects of the file: a sequence of objects, or one
/// array of them.
fn documents(input: &str) -> Result<Vec<Node>, ParseError> {
    let mut r = Reader {
        s: input.as_bytes(),
        at: 0,
        line: 1,
    };
    let mut out = Vec::new();
    loop {
        r.skip_ws();
        match r.peek() {
            None => break,
            Some(b',') => r.bump(),
            Some(b'{') => out.push(r.value("", 0)?),
            Some(b'[') => {
                let node = r.value("", 0)?;
                if let Value::Array(items) = node.value {
                    out.extend(items);
                }
            }
            Some(_) => return Err(r.err("", "a '{' opening a perftest report object")),
        }
    }
    if out.is_empty() {
        return Err(r.err("", "a '{' opening a perftest report object"));
    }
    Ok(out)
}

/// A scalar's text, or an error naming `path` and `expected`.
fn scalar<'n>(node: &'n Node, path: &str, expected: &str) -> Result<&'n str, ParseError> {
    match &node.value {
        Value::Scalar(s) => Ok(s),
        _ => Err(ParseError::new(
            node.line,
            format!("{path}: {expected}"),
            "an object or array",
        )),
    }
}

fn members<'n>(node: &'n Node, path: &str) -> Result<&'n [(String, Node)], ParseError> {
    match &node.value {
        Value::Object(m) => Ok(m),
        Value::Array(_) => Err(ParseError::new(
            node.line,
            format!("{path}: an object of `key: value` pairs"),
            "an array",
        )),
        Value::Scalar(s) => Err(ParseError::new(
            node.line,
            format!("{path}: an object of `key: value` pairs"),
            s,
        )),
    }
}

/// The fields of one `results` object.
struct Fields<'n> {
    path: String,
    line: usize,
    map: BTreeMap<&'n str, &'n Node>,
}

impl Fields<'_> {
    fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// `key` as a decimal scaled by `num` (exact), or an error naming it.
    fn number(&self, key: &str, num: u128, what: &str) -> Result<u64, ParseError> {
        let path = format!("{}.{key}", self.path);
        let Some(node) = self.map.get(key) else {
            return Err(ParseError::new(
                self.line,
                format!("{path}: {what}"),
                "no such key",
            ));
        };
        let s = scalar(node, &path, what)?;
        scaled_decimal(s, num, 1)
            .ok_or_else(|| ParseError::new(node.line, format!("{path}: {what}"), s))
    }

    fn optional(&self, key: &str, num: u128, what: &str) -> Result<Option<u64>, ParseError> {
        if self.has(key) {
            self.number(key, num, what).map(Some)
        } else {
            Ok(None)
        }
    }

    fn integer(&self, key: &str, what: &str) -> Result<u64, ParseError> {
        let path = format!("{}.{key}", self.path);
        let v = self.number(key, 1, what)?;
        let node = self.map[key];
        let s = scalar(node, &path, what)?;
        if s.contains('.') {
            return Err(ParseError::new(node.line, format!("{path}: {what}"), s));
        }
        Ok(v)
    }
}

/// Add the rows of one `results` object to `run`.
fn add_results(run: &mut PerftestRun, node: &Node, path: &str) -> Result<(), ParseError> {
    let m = members(node, path)?;
    let f = Fields {
        path: path.to_string(),
        line: node.line,
        map: m.iter().map(|(k, v)| (k.as_str(), v)).collect(),
    };
    let mib = 8 * 1_048_576;
    let us = 1000;
    let bw = f.has("BW_average") || f.has("BW_peak");
    let lat = f.has("t_min") || f.has("t_typical");
    let lat_dur = !lat && f.has("tps_average");
    if !bw && !lat && !lat_dur {
        if f.has("bw_avg") || f.has("msgRate_avg") {
            // --output=bandwidth / message_rate: one number, no row.
            return Ok(());
        }
        return Err(ParseError::new(
            node.line,
            format!("{path}: MsgSize and n_iterations with BW_peak, BW_average and MsgRate (a bandwidth test) or t_min, t_max, t_typical and t_avg (a latency test)"),
            &m.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(", "),
        ));
    }
    let bytes = f.integer("MsgSize", "a message size in bytes")?;
    let iterations = f.integer("n_iterations", "an iteration count")?;
    let line = node.line;
    if bw {
        run.bw.push(BwRow {
            line,
            sl: f
                .optional("sl", 1, "a service level")?
                .and_then(|v| u32::try_from(v).ok()),
            bytes,
            iterations,
            peak_bps: f.number("BW_peak", mib, "a bandwidth in MB/sec")?,
            avg_bps: f.number("BW_average", mib, "a bandwidth in MB/sec")?,
            msg_rate_per_s: f.optional("MsgRate", 1_000_000, "a message rate in Mpps")?,
        });
        if run.kind == TestKind::Unknown {
            run.kind = TestKind::Bandwidth;
        }
    } else if lat {
        let t = |k: &str| f.number(k, us, "a time in microseconds");
        let o = |k: &str| f.optional(k, us, "a time in microseconds");
        run.lat.push(LatRow {
            line,
            bytes,
            iterations,
            min_ns: t("t_min")?,
            max_ns: t("t_max")?,
            typical_ns: t("t_typical")?,
            avg_ns: t("t_avg")?,
            stdev_ns: o("t_stdev")?,
            p99_ns: o("percentile_99")?,
            p999_ns: o("percentile_99.9")?,
        });
        if run.kind == TestKind::Unknown {
            run.kind = TestKind::Latency;
        }
    } else {
        run.lat_duration.push(LatDurationRow {
            line,
            bytes,
            iterations,
            avg_ns: f.number("t_avg", us, "a time in microseconds")?,
            tps: f.number("tps_average", 1, "transactions per second")?,
        });
        run.duration_mode = true;
        if run.kind == TestKind::Unknown {
            run.kind = TestKind::Latency;
        }
    }
    Ok(())
}

/// `test_info.test` (`RDMA_Write_BW_Test`, `Send_Latency_Test`,
/// `RDMA_Write_Bidirectional_BW_Test`) into the run's title, verb, kind.
fn apply_test_name(run: &mut PerftestRun, test: &str) {
    run.title = Some(test.to_string());
    let body = test.strip_suffix("_Test").unwrap_or(test);
    let (body, kind) = if let Some(b) = body.strip_suffix("_BW") {
        (b, TestKind::Bandwidth)
    } else if let Some(b) = body.strip_suffix("_Latency") {
        (b, TestKind::Latency)
    } else {
        (body, TestKind::Unknown)
    };
    run.kind = kind;
    run.bidirectional = body.contains("Bidirectional");
    let mut verb = body.to_string();
    for extra in ["_Bidirectional", "_Post_List", "_forwarding", "_Multicast"] {
        verb = verb.replace(extra, "");
    }
    for v in ["RDMA_Write", "RDMA_Read", "Send", "Atomic"] {
        if verb.starts_with(v) {
            verb = v.to_string();
        }
    }
    if !verb.is_empty() {
        run.verb = Some(verb);
    }
}

fn apply_info(run: &mut PerftestRun, node: &Node) -> Result<(), ParseError> {
    for (k, v) in members(node, "test_info")? {
        let text = match &v.value {
            Value::Scalar(s) => s.clone(),
            _ => continue,
        };
        let number = || text.parse::<u32>().ok();
        match k.as_str() {
            "test" => apply_test_name(run, &text),
            "Device" => run.device = Some(text.clone()),
            "Number_of_qps" => run.qps = number(),
            "Connection_type" => run.connection = Some(text.clone()),
            "TX_depth" => run.tx_depth = number(),
            "Mtu" => run.mtu_bytes = number(),
            "Link_type" => run.link_type = Some(text.clone()),
            "GID_index" => run.gid_index = number(),
            _ => {}
        }
        run.fields.push((k.clone(), text));
    }
    Ok(())
}

fn counters(run: &mut PerftestRun, node: &Node) -> Result<(), ParseError> {
    let mut block = CounterBlock {
        line: node.line,
        device: run.device.clone(),
        duration_ns: None,
        counters: BTreeMap::new(),
    };
    for (k, v) in members(node, "counters")? {
        let path = format!("counters.{k}");
        let s = scalar(v, &path, "a counter value (an unsigned integer)")?;
        let n = s.parse::<u64>().map_err(|_| {
            ParseError::new(
                v.line,
                format!("{path}: a counter value (an unsigned integer)"),
                s,
            )
        })?;
        block.counters.insert(k.clone(), n);
    }
    run.counters = Some(block);
    Ok(())
}

/// Parse a perftest `--out_json` report (see the module's description).
pub fn parse(input: &str) -> Result<PerftestReport, ParseError> {
    let mut report = PerftestReport::default();
    for doc in documents(input)? {
        let m = members(&doc, "the report")?;
        let info = m.iter().find(|(k, _)| k == "test_info");
        let results = m.iter().find(|(k, _)| k == "results");
        if info.is_none() && results.is_none() {
            return Err(ParseError::new(
                doc.line,
                "a perftest report object with test_info or results",
                &m.iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            ));
        }
        let continues = info.is_none() && !report.runs.is_empty();
        let mut run = if continues {
            report.runs.pop().unwrap_or_default()
        } else {
            PerftestRun {
                line: doc.line,
                peak_measured: true,
                ..PerftestRun::default()
            }
        };
        if let Some((_, node)) = info {
            apply_info(&mut run, node)?;
        }
        if let Some((_, node)) = results {
            match &node.value {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        add_results(&mut run, item, &format!("results[{i}]"))?;
                    }
                }
                _ => add_results(&mut run, node, "results")?,
            }
        }
        if let Some((_, node)) = m.iter().find(|(k, _)| k == "counters") {
            counters(&mut run, node)?;
            if let Some((_, secs)) = m.iter().find(|(k, _)| k == "counters_seconds") {
                let what = "counters_seconds: the time the counter delta covers, in seconds";
                let s = scalar(secs, "counters_seconds", what)?;
                let ns = scaled_decimal(s, 1_000_000_000, 1)
                    .ok_or_else(|| ParseError::new(secs.line, what, s))?;
                if let Some(b) = run.counters.as_mut() {
                    b.duration_ns = Some(ns);
                }
            }
        }
        if !run.bw.is_empty() && run.bw.iter().all(|r| r.peak_bps == 0) {
            run.peak_measured = false;
        }
        if run.side == Side::Unknown && run.tx_depth.is_some() {
            run.side = Side::Client;
        }
        report.runs.push(run);
    }
    Ok(report)
}
