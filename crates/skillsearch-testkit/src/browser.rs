//! A real browser for page tests: headless Chromium (Debian's `chromium`) driven over the
//! Chrome DevTools Protocol on a pipe (`--remote-debugging-pipe`: commands go to the browser's
//! fd 3, answers and events come from its fd 4, each one JSON message ended by a NUL byte), so
//! a test clicks, types and presses keys as a person does and then reads what the page shows.
//! No websocket and no extra crate: `sh` hands the browser the two pipes as fds 3 and 4.
//!
//! One [`Browser`] is one browser process with one tab. Every wait has a time limit; a page
//! that never shows what a test waits for fails the test with what it shows instead. Uncaught
//! script errors and errors the browser logs (a blocked resource, a policy violation) are kept
//! for [`Browser::problems`].

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// How long one protocol command may take.
const COMMAND_LIMIT: Duration = Duration::from_secs(60);
/// How long [`Browser::wait_for`] waits.
pub const WAIT_LIMIT: Duration = Duration::from_secs(60);

/// The `chromium` on `PATH`, if any.
pub fn chromium() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("chromium"))
            .find(|p| p.is_file())
    })
}

/// A headless browser with one tab.
pub struct Browser {
    child: Child,
    to: ChildStdin,
    from: Receiver<Value>,
    next_id: u64,
    session: String,
    problems: Vec<String>,
    /// The profile, and the browser's stderr in it.
    profile: tempfile::TempDir,
}

impl Browser {
    /// Starts `chromium` headless (a 1280×900 window, English) with a fresh profile and opens
    /// one blank tab.
    pub fn launch(chromium: &Path) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(profile.path().join("stderr.log")).unwrap();
        let mut child = Command::new("sh")
            .arg("-c")
            // The browser reads commands on fd 3 and writes on fd 4: the pipes given as stdin
            // and stdout, moved there.
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>&2"#)
            .arg(chromium)
            .args([
                "--headless",
                "--remote-debugging-pipe",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--window-size=1280,900",
                "--lang=en-US",
            ])
            .arg(format!(
                "--user-data-dir={}",
                profile.path().join("data").display()
            ))
            .arg("about:blank")
            .env("LANG", "en_US.UTF-8")
            .env("TZ", "UTC")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        let to = child.stdin.take().unwrap();
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        let (tx, from) = channel();
        std::thread::spawn(move || {
            let mut message = Vec::new();
            while reader.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                if message.last() == Some(&0) {
                    message.pop();
                }
                match serde_json::from_slice::<Value>(&message) {
                    Ok(v) => {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                    Err(e) => eprintln!("browser: unreadable message ({e})"),
                }
                message.clear();
            }
        });
        let mut b = Browser {
            child,
            to,
            from,
            next_id: 0,
            session: String::new(),
            problems: Vec::new(),
            profile,
        };
        let target = b.browser_call("Target.createTarget", json!({"url": "about:blank"}));
        let target = target["targetId"].as_str().unwrap().to_owned();
        let attached = b.browser_call(
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        );
        b.session = attached["sessionId"].as_str().unwrap().to_owned();
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"] {
            b.call(domain, json!({}));
        }
        b
    }

    /// What the browser wrote to stderr, its last lines.
    fn stderr_tail(&self) -> String {
        let s = std::fs::read_to_string(self.profile.path().join("stderr.log")).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Sends one command and waits for its answer: its result, or the error the browser gave.
    fn send(
        &mut self,
        method: &str,
        params: Value,
        session: Option<String>,
    ) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = Value::String(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        if let Err(e) = self.to.write_all(&bytes).and_then(|()| self.to.flush()) {
            panic!(
                "cannot send {method} to the browser: {e}\n{}",
                self.stderr_tail()
            );
        }
        let started = Instant::now();
        loop {
            let left = COMMAND_LIMIT.saturating_sub(started.elapsed());
            match self.from.recv_timeout(left) {
                Ok(v) if v["id"].as_u64() == Some(id) => {
                    return match v.get("error") {
                        Some(e) => Err(format!("{method} {msg}: {e}")),
                        None => Ok(v["result"].clone()),
                    };
                }
                Ok(event) => self.note(&event),
                Err(RecvTimeoutError::Timeout) => {
                    panic!("{method}: no answer within {COMMAND_LIMIT:?}")
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("{method}: the browser went away\n{}", self.stderr_tail())
                }
            }
        }
    }

    fn browser_call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, None)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// One command to the tab; its result.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.try_call(method, params)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn try_call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let session = self.session.clone();
        self.send(method, params, Some(session))
    }

    /// Keeps what an event says went wrong on the page.
    fn note(&mut self, event: &Value) {
        let p = &event["params"];
        match event["method"].as_str() {
            Some("Runtime.exceptionThrown") => {
                let d = &p["exceptionDetails"];
                let what = d["exception"]["description"]
                    .as_str()
                    .or(d["text"].as_str())
                    .unwrap_or("an exception");
                self.problems.push(format!("uncaught: {what}"));
            }
            Some("Log.entryAdded") if p["entry"]["level"] == "error" => {
                let e = &p["entry"];
                self.problems.push(format!(
                    "{} error: {} {}",
                    e["source"].as_str().unwrap_or(""),
                    e["text"].as_str().unwrap_or(""),
                    e["url"].as_str().unwrap_or("")
                ));
            }
            Some("Runtime.consoleAPICalled") if p["type"] == "error" => {
                self.problems.push(format!("console.error: {}", p["args"]));
            }
            _ => {}
        }
    }

    /// Script errors and errors the browser logged since the last call, and takes them.
    pub fn problems(&mut self) -> Vec<String> {
        while let Ok(event) = self.from.try_recv() {
            self.note(&event);
        }
        std::mem::take(&mut self.problems)
    }

    /// Loads `url` in the tab (returns once it is navigating; see [`Browser::wait_for`]).
    pub fn navigate(&mut self, url: &str) {
        let r = self.call("Page.navigate", json!({"url": url}));
        if let Some(e) = r.get("errorText") {
            panic!("cannot open {url}: {e}");
        }
    }

    /// The value of the script expression `js` (awaited if it is a promise).
    pub fn eval(&mut self, js: &str) -> Value {
        self.try_eval(js).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Browser::eval`], or why it failed: the script threw, or the page it ran in went away
    /// (a navigation replaced it).
    fn try_eval(&mut self, js: &str) -> Result<Value, String> {
        let r = self.try_call(
            "Runtime.evaluate",
            json!({"expression": js, "returnByValue": true, "awaitPromise": true}),
        )?;
        match r.get("exceptionDetails") {
            Some(e) => Err(format!("{js}: {e}")),
            None => Ok(r["result"]["value"].clone()),
        }
    }

    /// Waits until the script expression `js` is true; panics after [`WAIT_LIMIT`] with what
    /// the page shows. An evaluation that fails (the page is being replaced) is tried again.
    pub fn wait_for(&mut self, js: &str, what: &str) {
        let started = Instant::now();
        loop {
            let last = self.try_eval(&format!("!!({js})"));
            if last == Ok(Value::Bool(true)) {
                return;
            }
            if started.elapsed() > WAIT_LIMIT {
                let shown = self.eval("document.body ? document.body.innerText : ''");
                let shown: String = shown.as_str().unwrap_or("").chars().take(3000).collect();
                panic!(
                    "waited {WAIT_LIMIT:?} for {what} ({js}; last: {last:?}); problems: {:?}; the page shows:\n{shown}",
                    self.problems()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The text a person reads in the first element `selector` matches (its rendered text;
    /// a list's options), whitespace collapsed; `None` when nothing matches.
    pub fn text(&mut self, selector: &str) -> Option<String> {
        let js = format!(
            "(() => {{ const e = document.querySelector({sel}); if (!e) return null; \
             return e.tagName === 'SELECT' ? [...e.options].map((o) => o.text).join('\\n') : e.innerText; }})()",
            sel = json!(selector)
        );
        self.eval(&js)
            .as_str()
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
    }

    /// How many elements `selector` matches.
    pub fn count(&mut self, selector: &str) -> usize {
        let js = format!("document.querySelectorAll({}).length", json!(selector));
        self.eval(&js).as_u64().unwrap() as usize
    }

    /// The tab's address.
    pub fn url(&mut self) -> String {
        self.eval("location.href").as_str().unwrap().to_owned()
    }

    /// Clicks the middle of the first element `selector` matches with the mouse.
    pub fn click(&mut self, selector: &str) {
        self.click_at(selector, 0.5);
    }

    /// Clicks the first element `selector` matches with the mouse, `across` of its width from
    /// its left edge (0.5: the middle) and halfway down; scrolls it to the middle of the window
    /// first unless a person sees that spot already. Panics if the element is missing, not
    /// shown, disabled, or covered there by something else.
    pub fn click_at(&mut self, selector: &str, across: f64) {
        let js = format!(
            "(() => {{ const e = document.querySelector({sel}); if (!e) return 'missing'; \
             const spot = () => {{ const r = e.getBoundingClientRect(); \
               const x = r.left + r.width * {across}, y = r.top + r.height / 2; \
               const at = r.width && r.height && x >= 0 && y >= 0 && x < innerWidth && y < innerHeight \
                 ? document.elementFromPoint(x, y) : null; \
               return {{ x, y, at, shown: !!(r.width && r.height) }}; }}; \
             let s = spot(); \
             if (!s.at || !(s.at === e || e.contains(s.at))) {{ \
               e.scrollIntoView({{block: 'center', inline: 'center'}}); s = spot(); }} \
             if (!s.shown) return 'not shown'; \
             if (!s.at || !(s.at === e || e.contains(s.at))) \
               return 'covered by ' + (s.at ? s.at.outerHTML.slice(0, 120) : 'nothing'); \
             if (e.disabled) return 'disabled'; \
             return [s.x, s.y]; }})()",
            sel = json!(selector)
        );
        let at = self.eval(&js);
        let Some([x, y]) = at
            .as_array()
            .and_then(|a| Some([a.first()?.as_f64()?, a.get(1)?.as_f64()?]))
        else {
            panic!("cannot click {selector}: {at}");
        };
        self.call(
            "Input.dispatchMouseEvent",
            json!({"type": "mouseMoved", "x": x, "y": y}),
        );
        for kind in ["mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "buttons": u8::from(kind == "mousePressed"), "clickCount": 1}),
            );
        }
    }

    /// Types `text` into what has the focus, one key at a time.
    pub fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            let s = c.to_string();
            let code = match c {
                'a'..='z' | 'A'..='Z' => c.to_ascii_uppercase() as u32,
                '0'..='9' | ' ' => c as u32,
                '-' => 189,
                '/' => 191,
                '.' => 190,
                _ => 0,
            };
            self.call(
                "Input.dispatchKeyEvent",
                json!({"type": "keyDown", "key": s, "text": s, "unmodifiedText": s, "windowsVirtualKeyCode": code}),
            );
            self.call(
                "Input.dispatchKeyEvent",
                json!({"type": "keyUp", "key": s, "windowsVirtualKeyCode": code}),
            );
        }
    }

    /// Presses and releases a named key (`Enter`, `Tab`, `Escape`, `Backspace`, `ArrowDown`,
    /// `ArrowUp`, `Home`, `End`), with `ctrl` held if asked ("ctrl+a" selects all).
    pub fn press(&mut self, key: &str) {
        let (ctrl, key) = match key.strip_prefix("ctrl+") {
            Some(k) => (true, k),
            None => (false, key),
        };
        let (code, vk, text) = match key {
            "Enter" => ("Enter", 13, Some("\r")),
            "Tab" => ("Tab", 9, None),
            "Escape" => ("Escape", 27, None),
            "Backspace" => ("Backspace", 8, None),
            "ArrowDown" => ("ArrowDown", 40, None),
            "ArrowUp" => ("ArrowUp", 38, None),
            "Home" => ("Home", 36, None),
            "End" => ("End", 35, None),
            "a" => ("KeyA", 65, None),
            other => panic!("press: unknown key {other}"),
        };
        let modifiers = if ctrl { 2 } else { 0 };
        let mut down = json!({"type": if text.is_some() && !ctrl { "keyDown" } else { "rawKeyDown" },
            "key": key, "code": code, "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk, "modifiers": modifiers});
        if let (Some(t), false) = (text, ctrl) {
            down["text"] = json!(t);
            down["unmodifiedText"] = json!(t);
        }
        if ctrl && key == "a" {
            down["commands"] = json!(["selectAll"]);
        }
        self.call("Input.dispatchKeyEvent", down);
        self.call(
            "Input.dispatchKeyEvent",
            json!({"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk, "modifiers": modifiers}),
        );
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Closing asks the browser to end its renderers too; a kill is the fallback.
        let mut bytes = serde_json::to_vec(&json!({"id": 0, "method": "Browser.close"})).unwrap();
        bytes.push(0);
        let _ = self.to.write_all(&bytes);
        let _ = self.to.flush();
        let started = Instant::now();
        while self.child.try_wait().ok().flatten().is_none() {
            if started.elapsed() > Duration::from_secs(5) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
