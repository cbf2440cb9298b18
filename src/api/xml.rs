//! BBB-style XML answers, written with quick-xml: values escaped, URLs and meeting ids in CDATA
//! that survives `]]>`, no declaration and no whitespace between tags.

use crate::base::ids::HookId;

use std::sync::Arc;

use quick_xml::{
    Writer,
    events::{BytesCData, BytesEnd, BytesStart, BytesText, Event},
};

use crate::{base::secret::Secret, hooks::Hook, tenants::View};

/// Builds one `<response>` document.
struct Doc {
    w: Writer<Vec<u8>>,
}

impl Doc {
    fn new(returncode: &str) -> Self {
        let mut d = Doc {
            w: Writer::new(Vec::with_capacity(256)),
        };
        d.open("response");
        d.text("returncode", returncode);
        d
    }

    // Writing into a Vec cannot fail, so the io::Results below are ignored.
    fn open(&mut self, name: &str) {
        let _ = self.w.write_event(Event::Start(BytesStart::new(name)));
    }

    fn close(&mut self, name: &str) {
        let _ = self.w.write_event(Event::End(BytesEnd::new(name)));
    }

    fn text(&mut self, name: &str, value: &str) {
        self.open(name);
        let _ = self.w.write_event(Event::Text(BytesText::new(value)));
        self.close(name);
    }

    fn cdata(&mut self, name: &str, value: &str) {
        self.open(name);
        for part in BytesCData::escaped(value) {
            let _ = self.w.write_event(Event::CData(part));
        }
        self.close(name);
    }

    fn finish(mut self) -> String {
        self.close("response");
        String::from_utf8(self.w.into_inner()).unwrap_or_default()
    }
}

/// `hooks/create` registered a new hook; with its own signing secret when it has one
/// (`delivery.hook_secrets`).
pub(crate) fn created(hook: &Hook, secret: Option<&Secret>) -> String {
    let mut d = Doc::new("SUCCESS");
    d.text("hookID", &hook.id.to_string());
    d.text("permanentHook", bool_str(hook.permanent));
    d.text("rawData", bool_str(hook.get_raw));
    if let Some(s) = secret {
        d.text("signingSecret", s.expose());
    }
    d.finish()
}

/// `hooks/create` for a URL that already has a hook (its signing secret again, when hooks have
/// their own).
pub(crate) fn duplicate(id: HookId, secret: Option<&Secret>) -> String {
    let mut d = Doc::new("SUCCESS");
    d.text("hookID", &id.to_string());
    d.text("messageKey", "duplicateWarning");
    d.text("message", "There is already a hook for this callback URL.");
    if let Some(s) = secret {
        d.text("signingSecret", s.expose());
    }
    d.finish()
}

/// `hooks/destroy` removed the hook.
pub(crate) fn removed() -> String {
    let mut d = Doc::new("SUCCESS");
    d.text("removed", "true");
    d.finish()
}

/// Any FAILED answer.
pub(crate) fn failed(message_key: &str, message: &str) -> String {
    let mut d = Doc::new("FAILED");
    d.text("messageKey", message_key);
    d.text("message", message);
    d.finish()
}

/// `hooks/list`; given `tenants` (the operator's list), a tenant's hook also says whose it is
/// (`<tenant>` with its name, after `rawData`; the operator's hooks have none, so a relay
/// without tenants answers exactly as BBB's webhooks do).
pub(crate) fn list(hooks: &[Arc<Hook>], tenants: Option<&View>) -> String {
    let mut d = Doc::new("SUCCESS");
    d.open("hooks");
    for h in hooks {
        d.open("hook");
        d.text("hookID", &h.id.to_string());
        d.cdata("callbackURL", &h.callback_url);
        if let Some(m) = &h.meeting_id {
            d.cdata("meetingID", m);
        }
        if let Some(ids) = &h.event_ids {
            d.text("eventID", &ids.join(","));
        }
        d.text("permanentHook", bool_str(h.permanent));
        d.text("rawData", bool_str(h.get_raw));
        if let (Some(view), Some(id)) = (tenants, &h.tenant) {
            d.text(
                "tenant",
                view.by_id(id).map_or(id.as_str(), |t| t.name.as_str()),
            );
        }
        d.close("hook");
    }
    d.close("hooks");
    d.finish()
}

fn bool_str(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_bodies() {
        assert_eq!(
            failed(
                "checksumError",
                "You did not pass the checksum security check."
            ),
            "<response><returncode>FAILED</returncode><messageKey>checksumError</messageKey><message>You did not pass the checksum security check.</message></response>"
        );
        assert_eq!(
            removed(),
            "<response><returncode>SUCCESS</returncode><removed>true</removed></response>"
        );
        assert_eq!(
            list(&[], None),
            "<response><returncode>SUCCESS</returncode><hooks></hooks></response>"
        );
    }

    #[test]
    fn list_escapes_and_splits_cdata() {
        let h = Arc::new(Hook {
            id: HookId(3),
            callback_url: "http://h/cb?a=]]>&b=<x>".into(),
            meeting_id: Some("m]]>1".into()),
            event_ids: Some(vec!["a<b".into(), "c".into()]),
            get_raw: true,
            permanent: false,
            tenant: None,
            disabled: None,
            signing: None,
        });
        let xml = list(std::slice::from_ref(&h), None);
        assert_eq!(
            xml,
            "<response><returncode>SUCCESS</returncode><hooks><hook><hookID>3</hookID><callbackURL><![CDATA[http://h/cb?a=]]]]><![CDATA[>&b=<x>]]></callbackURL><meetingID><![CDATA[m]]]]><![CDATA[>1]]></meetingID><eventID>a&lt;b,c</eventID><permanentHook>false</permanentHook><rawData>true</rawData></hook></hooks></response>"
        );
        // A real XML reader gets the original text back.
        let mut reader = quick_xml::Reader::from_str(&xml);
        let mut url = String::new();
        let mut inside = false;
        loop {
            match reader.read_event().unwrap() {
                Event::Start(e) if e.name().0 == "callbackURL" => inside = true,
                Event::End(e) if e.name().0 == "callbackURL" => inside = false,
                Event::CData(c) if inside => url.push_str(&c.into_inner()),
                Event::Eof => break,
                _ => {}
            }
        }
        assert_eq!(url, "http://h/cb?a=]]>&b=<x>");
        // A tenant's hook in the operator's list says whose it is; without tenants, nothing.
        let theirs = Arc::new(Hook {
            tenant: Some("u-1".into()),
            meeting_id: None,
            event_ids: None,
            callback_url: "http://h/".into(),
            ..(*h).clone()
        });
        let view = View::of([Arc::new(
            crate::tenants::Tenant::new("u-1", "acme", vec![crate::base::secret::Secret::new("s")])
                .expect("tenant"),
        )]);
        assert!(
            list(std::slice::from_ref(&theirs), Some(&view)).ends_with(
                "<rawData>true</rawData><tenant>acme</tenant></hook></hooks></response>"
            )
        );
        assert!(
            list(std::slice::from_ref(&theirs), None)
                .ends_with("<rawData>true</rawData></hook></hooks></response>")
        );
        assert!(
            list(&[h], Some(&view)).ends_with("<rawData>true</rawData></hook></hooks></response>")
        );
    }
}
