//! A request's head as the page needs it: method, path, and the token it carries.

/// What the page reads of a request.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub method: &'a str,
    /// The target without its query.
    pub path: &'a str,
    /// `?token=` (percent-decoded), else `Authorization: Bearer`'s.
    pub token: Option<String>,
}

impl<'a> Request<'a> {
    /// The request whose head (request line and headers) is `head`.
    pub fn parse(head: &'a str) -> Self {
        let mut lines = head.lines();
        let mut words = lines.next().unwrap_or_default().split_whitespace();
        let method = words.next().unwrap_or_default();
        let target = words.next().unwrap_or_default();
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let from_query = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("token="))
            .and_then(percent_decode);
        let from_header = || {
            lines.find_map(|l| {
                let (name, value) = l.split_once(':')?;
                if !name.trim().eq_ignore_ascii_case("authorization") {
                    return None;
                }
                let (scheme, token) = value.trim().split_once(' ')?;
                scheme
                    .eq_ignore_ascii_case("bearer")
                    .then(|| token.trim().to_owned())
            })
        };
        Request {
            method,
            path,
            token: from_query.or_else(from_header),
        }
    }
}

/// `s` with its `%XX` escapes (and `+` for a space) decoded; `None` if that is not UTF-8 or an
/// escape is broken.
pub fn percent_decode(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        out.push(match b {
            b'%' => {
                let hex = [bytes.next()?, bytes.next()?];
                u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?
            }
            b'+' => b' ',
            b => b,
        });
    }
    String::from_utf8(out).ok()
}

/// `s` with every byte but letters, digits and `-._~` as `%XX`: safe in a URL's query and in
/// an HTML attribute.
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect()
}
