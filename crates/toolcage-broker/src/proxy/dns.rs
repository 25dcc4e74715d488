//! The call's DNS stub: what `/etc/resolv.conf` points to inside (UDP and
//! TCP on 127.0.0.1:53 of the call's own network namespace). It never asks
//! anyone: a name the policy allows gets a synthetic address (127.1.x.y)
//! that the proxy maps back to the name; every other name is NXDOMAIN. No
//! DNS packet leaves the sandbox, so a lookup cannot carry data out.
//!
//! Only standard queries with one question are answered; A gets the
//! synthetic address, AAAA and other types of an allowed name get an empty
//! answer (the name exists, without IPv6), so clients fall back to IPv4.

use std::collections::HashMap;
use std::net::Ipv4Addr;

/// The answer for one question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    A(Ipv4Addr),
    /// The name exists; no record of this type.
    NoData,
    NxDomain,
    /// Could not answer (out of synthetic addresses).
    ServFail,
}

const FORMERR: u16 = 1;
const SERVFAIL: u16 = 2;
const NXDOMAIN: u16 = 3;
const NOTIMP: u16 = 4;
const REFUSED: u16 = 5;
const TYPE_A: u16 = 1;
const CLASS_IN: u16 = 1;

/// A parsed question: the name (labels joined by dots, as sent) or
/// `None` when a label is not a printable name (NUL, a dot inside a
/// label, non-ASCII), and the query type.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Question {
    pub name: Option<String>,
    pub qtype: u16,
    qclass: u16,
    /// Byte range of the question in the query (copied into the reply).
    end: usize,
}

fn u16_at(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?]))
}

fn question(q: &[u8]) -> Option<Question> {
    let mut i = 12;
    let mut labels: Vec<&[u8]> = Vec::new();
    loop {
        let len = *q.get(i)? as usize;
        i += 1;
        if len == 0 {
            break;
        }
        if len > 63 || i + len > q.len() || i > 12 + 255 {
            return None; // also compression pointers (0xc0): not in a question
        }
        labels.push(&q[i..i + len]);
        i += len;
    }
    let qtype = u16_at(q, i)?;
    let qclass = u16_at(q, i + 2)?;
    let printable = |l: &&[u8]| l.iter().all(|b| b.is_ascii_graphic() && *b != b'.');
    let name = labels
        .iter()
        .all(printable)
        .then(|| {
            labels
                .iter()
                .map(|l| String::from_utf8_lossy(l).into_owned())
                .collect::<Vec<_>>()
                .join(".")
        })
        .filter(|n| !n.is_empty());
    Some(Question {
        name,
        qtype,
        qclass,
        end: i + 4,
    })
}

fn header(q: &[u8], rcode: u16, qd: u16, an: u16) -> Vec<u8> {
    let flags = u16_at(q, 2).unwrap_or(0);
    let opcode = flags & 0x7800;
    let rd = flags & 0x0100;
    // QR, the query's opcode and RD, AA (we are the authority), RA.
    let out_flags = 0x8000 | opcode | 0x0400 | rd | 0x0080 | rcode;
    let mut h = Vec::with_capacity(64);
    h.extend_from_slice(&q[..2]);
    h.extend_from_slice(&out_flags.to_be_bytes());
    for n in [qd, an, 0, 0] {
        h.extend_from_slice(&n.to_be_bytes());
    }
    h
}

/// The reply to `query`, asking `lookup` about the question's name (and
/// type); `None` for a packet that is not a query (no reply at all).
pub(crate) fn reply(
    query: &[u8],
    lookup: impl FnOnce(Option<&str>, u16) -> Answer,
) -> Option<Vec<u8>> {
    if query.len() < 12 {
        return None;
    }
    let flags = u16_at(query, 2)?;
    if flags & 0x8000 != 0 {
        return None; // a response, not a query
    }
    if flags & 0x7800 != 0 {
        return Some(header(query, NOTIMP, 0, 0));
    }
    if u16_at(query, 4) != Some(1) {
        return Some(header(query, FORMERR, 0, 0));
    }
    let Some(q) = question(query) else {
        return Some(header(query, FORMERR, 0, 0));
    };
    if q.qclass != CLASS_IN {
        return Some(header(query, REFUSED, 0, 0));
    }
    let answer = lookup(q.name.as_deref(), q.qtype);
    let (rcode, an) = match answer {
        Answer::A(_) => (0, 1),
        Answer::NoData => (0, 0),
        Answer::NxDomain => (NXDOMAIN, 0),
        Answer::ServFail => (SERVFAIL, 0),
    };
    let mut r = header(query, rcode, 1, an);
    r.extend_from_slice(&query[12..q.end]);
    if let Answer::A(ip) = answer {
        r.extend_from_slice(&[0xc0, 0x0c]); // the question's name
        r.extend_from_slice(&TYPE_A.to_be_bytes());
        r.extend_from_slice(&CLASS_IN.to_be_bytes());
        r.extend_from_slice(&1u32.to_be_bytes()); // TTL: ask again soon
        r.extend_from_slice(&4u16.to_be_bytes());
        r.extend_from_slice(&ip.octets());
    }
    Some(r)
}

/// Is `qtype` an A query.
pub(crate) fn is_a(qtype: u16) -> bool {
    qtype == TYPE_A
}

/// The synthetic addresses of one call: 127.1.0.1 upwards, one per name,
/// stable for the call. Inside the call these are loopback addresses
/// where only toolcage's capture listeners answer.
#[derive(Debug, Default)]
pub(crate) struct Synthetic {
    by_name: HashMap<String, Ipv4Addr>,
    by_addr: HashMap<Ipv4Addr, String>,
}

/// 127.1.0.1 upwards; at most 4096 names per call (memory stays bounded
/// whatever a tool asks for under a wildcard pattern).
const FIRST: u32 = 0x7f01_0001;
const LAST: u32 = FIRST + 4095;

impl Synthetic {
    /// The address of `name` (normalised), allocated on first use; `None`
    /// when the range is used up.
    pub(crate) fn address(&mut self, name: &str) -> Option<Ipv4Addr> {
        if let Some(a) = self.by_name.get(name) {
            return Some(*a);
        }
        let next = FIRST + self.by_name.len() as u32;
        if next > LAST {
            return None;
        }
        let a = Ipv4Addr::from(next);
        self.by_name.insert(name.to_string(), a);
        self.by_addr.insert(a, name.to_string());
        Some(a)
    }

    /// The name a synthetic address stands for.
    pub(crate) fn name(&self, addr: Ipv4Addr) -> Option<&str> {
        self.by_addr.get(&addr).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query for `name` (labels as given), type `qtype`.
    fn query(labels: &[&[u8]], qtype: u16) -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for l in labels {
            q.push(l.len() as u8);
            q.extend_from_slice(l);
        }
        q.push(0);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&CLASS_IN.to_be_bytes());
        q
    }

    fn rcode(r: &[u8]) -> u16 {
        u16_at(r, 2).unwrap() & 0xf
    }

    #[test]
    fn allowed_names_get_their_address() {
        let q = query(&[b"Allowed", b"test"], TYPE_A);
        let r = reply(&q, |name, t| {
            assert_eq!((name, t), (Some("Allowed.test"), TYPE_A));
            Answer::A(Ipv4Addr::new(127, 1, 0, 1))
        })
        .unwrap();
        assert_eq!(&r[..2], &[0x12, 0x34], "same id");
        assert_eq!(rcode(&r), 0);
        assert_eq!(u16_at(&r, 6), Some(1), "one answer");
        assert_eq!(&r[r.len() - 4..], &[127, 1, 0, 1]);
        assert_eq!(&r[12..q.len()], &q[12..], "question echoed");
    }

    #[test]
    fn other_names_and_odd_labels_are_nxdomain() {
        let r = reply(&query(&[b"other", b"test"], TYPE_A), |_, _| {
            Answer::NxDomain
        })
        .unwrap();
        assert_eq!((rcode(&r), u16_at(&r, 6)), (NXDOMAIN, Some(0)));
        // A NUL or a dot inside a label is no name at all.
        for labels in [
            &[&b"evil\0"[..], b"allowed", b"test"][..],
            &[b"allowed.test", b"evil"],
        ] {
            let mut seen = Some("unset".to_string());
            reply(&query(labels, TYPE_A), |name, _| {
                seen = name.map(str::to_string);
                Answer::NxDomain
            })
            .unwrap();
            assert_eq!(seen, None, "{labels:?}");
        }
    }

    #[test]
    fn malformed_packets() {
        assert_eq!(reply(&[0; 5], |_, _| unreachable!()), None);
        let mut resp = query(&[b"a"], TYPE_A);
        resp[2] |= 0x80;
        assert_eq!(
            reply(&resp, |_, _| unreachable!()),
            None,
            "responses are ignored"
        );
        let mut two = query(&[b"a"], TYPE_A);
        two[5] = 2;
        assert_eq!(rcode(&reply(&two, |_, _| unreachable!()).unwrap()), FORMERR);
        let truncated = &query(&[b"abc"], TYPE_A)[..14];
        assert_eq!(
            rcode(&reply(truncated, |_, _| unreachable!()).unwrap()),
            FORMERR
        );
        let mut pointer = query(&[b"a"], TYPE_A);
        pointer[12] = 0xc0;
        assert_eq!(
            rcode(&reply(&pointer, |_, _| unreachable!()).unwrap()),
            FORMERR
        );
    }

    #[test]
    fn synthetic_addresses_are_stable_and_bounded() {
        let mut s = Synthetic::default();
        let a = s.address("a.test").unwrap();
        assert_eq!(a, Ipv4Addr::new(127, 1, 0, 1));
        assert_eq!(s.address("a.test"), Some(a));
        assert_eq!(s.address("b.test"), Some(Ipv4Addr::new(127, 1, 0, 2)));
        assert_eq!(s.name(a), Some("a.test"));
        assert_eq!(s.name(Ipv4Addr::new(127, 0, 0, 1)), None);
    }
}
