//! Network by domain, measured side by side in one run: a sandboxed
//! `curl` to a local HTTP server through the call's proxy (domain mode,
//! the server's name pinned in `[network.hosts]`), plain and through a
//! CONNECT tunnel, against the same request with the network on. Then 100
//! proxied connections open at once in one call, with the growth of this
//! process's peak memory (the proxy runs on threads of the caller).
//!
//! Run with `cargo bench --bench domains` (as root or where user
//! namespaces work). Prints medians and differences; asserts nothing.

#[path = "common/mod.rs"]
mod common;
use common::median;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use toolcage::policy::{DomainPolicy, Grant, Network};
use toolcage::sandbox::{self, Command, Outcome};

const ROUNDS: usize = 100;

/// Answers every request with a short body; one thread per connection.
fn server() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || answer(c));
        }
    });
    port
}

fn answer(mut c: TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match c.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n");
}

fn grant(project: PathBuf, network: Network) -> Grant {
    let mut g = Grant::closed(project.clone());
    g.read = ["/usr", "/bin", "/lib", "/lib64", "/etc"]
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    g.write = vec![project, "/dev/null".into()];
    g.env_allow = vec!["PATH".into()];
    g.network = network;
    g
}

fn run(g: &Grant, argv: &[&str]) -> Outcome {
    let cmd = Command {
        argv: argv.iter().map(|a| (*a).into()).collect(),
        ..Default::default()
    };
    let o = sandbox::run(g, &cmd, None).expect("sandbox run");
    assert!(
        o.stdout.text.starts_with("ok"),
        "{argv:?}: {} {}",
        o.stdout.text,
        o.stderr.text
    );
    o
}

fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let port = server();
    let project = std::env::temp_dir().join(format!("tc-bench-domains-{}", std::process::id()));
    std::fs::create_dir_all(&project).unwrap();
    let pins = [("allowed.test", "127.0.0.1")];
    let domains = Network::Domains(DomainPolicy::new(&["allowed.test"], &[], &pins).unwrap());
    let proxied = grant(project.clone(), domains);
    let open = grant(project.clone(), Network::On);
    let direct_url = format!("http://127.0.0.1:{port}/x");
    let named_url = format!("http://allowed.test:{port}/x");
    let cases: [(&str, &Grant, Vec<&str>); 3] = [
        (
            "network on, direct",
            &open,
            vec!["curl", "-sS", &direct_url],
        ),
        (
            "domains, via the proxy",
            &proxied,
            vec!["curl", "-sS", &named_url],
        ),
        (
            "domains, CONNECT tunnel",
            &proxied,
            vec!["curl", "-sS", "--proxytunnel", &named_url],
        ),
    ];
    let mut times = vec![Vec::with_capacity(ROUNDS); cases.len()];
    for round in 0..10 + ROUNDS {
        for k in 0..cases.len() {
            let i = (round + k) % cases.len();
            let (_, g, argv) = &cases[i];
            let t = Instant::now();
            run(g, argv);
            if round >= 10 {
                times[i].push(t.elapsed());
            }
        }
    }
    let medians: Vec<Duration> = times.into_iter().map(median).collect();
    println!("sandboxed curl to a local server, {ROUNDS} interleaved rounds, median");
    for ((name, _, _), m) in cases.iter().zip(&medians) {
        println!("  {name:<28} {:7.3} ms", ms(*m));
    }
    for (i, name) in [(1, "proxy"), (2, "CONNECT")] {
        println!(
            "  {name} costs {:+.3} ms over the network on (target <= +2 ms)",
            ms(medians[i]) - ms(medians[0])
        );
    }

    // 100 tunnels open together in one call, then each used.
    let code = format!(
        "import socket\n\
         socks = []\n\
         for i in range(100):\n    c = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n    c.sendall(b'CONNECT allowed.test:{port} HTTP/1.1\\r\\n\\r\\n')\n    r = b''\n    while b'\\r\\n\\r\\n' not in r:\n        r += c.recv(4096)\n    socks.append(c)\n\
         for c in socks:\n    c.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n\
         n = 0\n\
         for c in socks:\n    d = b''\n    while True:\n        x = c.recv(65536)\n        if not x: break\n        d += x\n    n += d.endswith(b'ok\\n')\n\
         print('ok', n)\n"
    );
    let before = peak_kib();
    let t = Instant::now();
    let o = run(&proxied, &["python3", "-c", &code]);
    println!(
        "100 CONNECT tunnels at once: {} answered in {:.1} ms; peak memory of the caller {} -> {} KiB ({:+} KiB)",
        o.stdout.text.trim().trim_start_matches("ok "),
        ms(t.elapsed()),
        before,
        peak_kib(),
        peak_kib() as i64 - before as i64
    );
    let _ = std::fs::remove_dir_all(&project);
}
