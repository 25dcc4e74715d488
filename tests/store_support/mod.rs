//! A real `redis-server` on a random loopback port, for the store tests:
//! started, stopped and started again on the same port (a store that goes
//! away and comes back).
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Redis {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    pub password: Option<String>,
}

/// Where `redis-server` is, or `None` (the test then says it is skipped).
pub fn binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
}

/// Start one, or say why the test is skipped: only when the binary is
/// absent (CI installs it).
pub fn start(test: &str) -> Option<Redis> {
    start_with(test, None)
}

/// [`start`], requiring `password` (`requirepass`).
pub fn start_with(test: &str, password: Option<&str>) -> Option<Redis> {
    if binary().is_none() {
        eprintln!(
            "{test}: SKIPPED: redis-server is not installed (apt-get install -y redis-server)"
        );
        return None;
    }
    let mut r = Redis {
        child: None,
        port: 0,
        dir: tempfile::tempdir().unwrap(),
        password: password.map(str::to_string),
    };
    // A free port now may be taken before redis binds it: try a few.
    for _ in 0..5 {
        r.port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if r.try_spawn() {
            return Some(r);
        }
    }
    panic!("redis-server did not start on any of 5 ports");
}

impl Redis {
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn try_spawn(&mut self) -> bool {
        let mut c = Command::new(binary().unwrap());
        c.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(p) = &self.password {
            c.args(["--requirepass", p]);
        }
        let mut child = c.spawn().expect("spawn redis-server");
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = child.try_wait() {
                return false;
            }
            if self.answers() {
                self.child = Some(child);
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// Whether it answers PING.
    pub fn answers(&self) -> bool {
        let mut info = redis::IntoConnectionInfo::into_connection_info(self.url()).unwrap();
        if let Some(p) = &self.password {
            let s = info.redis_settings().clone().set_password(p);
            info = info.set_redis_settings(s);
        }
        let Ok(client) = redis::Client::open(info) else {
            return false;
        };
        let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
            return false;
        };
        redis::cmd("PING").query::<String>(&mut c).is_ok()
    }

    /// Stop it (the store goes away).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start it again on the same port (empty: nothing was saved).
    pub fn restart(&mut self) {
        self.stop();
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if self.try_spawn() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("redis-server did not start again on port {}", self.port);
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Every key in `redis`, sorted.
pub fn keys(redis: &Redis) -> Vec<String> {
    let client = redis::Client::open(redis.url()).unwrap();
    let mut c = client
        .get_connection_with_timeout(Duration::from_secs(2))
        .unwrap();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    keys.sort();
    keys
}
