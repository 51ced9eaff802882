//! Which route carries a notification, what delivery policy it defaults to, and the templates
//! that may stand in for literal content. Built from configuration at start-up.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use super::{Channel, Delivery, FieldError};

/// What the enqueue path needs to know of a configured route.
#[derive(Debug, Clone)]
pub struct RouteInfo {
    pub channels: Vec<Channel>,
    pub delivery: Delivery,
    /// Only these tenants may use it; `None`: any tenant its tokens allow.
    pub tenants: Option<Vec<String>>,
    /// The senders an email may name in `from`: addresses, or `@domain` for any at a domain.
    pub allowed_from: Vec<String>,
    /// The route's vendor keeps an email's `tags`.
    pub tags: bool,
}

impl RouteInfo {
    /// Whether `tenant` may send through it: it does not keep to other tenants.
    pub fn admits(&self, tenant: &str) -> bool {
        self.tenants
            .as_ref()
            .is_none_or(|t| t.iter().any(|t| t == tenant))
    }
}

/// Which routes the enqueue path may choose: their names, the channels each serves, and the
/// default route of each channel. (`dispatch::Routes` holds the same routes at run time.)
#[derive(Debug, Clone, Default)]
pub struct Routing {
    routes: BTreeMap<String, RouteInfo>,
    defaults: HashMap<Channel, String>,
}

impl Routing {
    pub fn new(routes: BTreeMap<String, RouteInfo>, defaults: HashMap<Channel, String>) -> Self {
        Routing { routes, defaults }
    }

    pub fn info(&self, name: &str) -> Option<&RouteInfo> {
        self.routes.get(name)
    }

    /// The channels `route` is the default route of.
    pub fn default_for(&self, route: &str) -> Vec<Channel> {
        let mut channels: Vec<Channel> = self
            .defaults
            .iter()
            .filter(|(_, r)| *r == route)
            .map(|(c, _)| *c)
            .collect();
        channels.sort_by_key(|c| c.as_str());
        channels
    }

    /// The route for `channel`: the one asked for, or the channel's default.
    pub fn choose(
        &self,
        channel: Channel,
        requested: Option<&str>,
    ) -> Result<(&str, &RouteInfo), FieldError> {
        let name = match requested {
            Some(name) => name,
            None => self
                .defaults
                .get(&channel)
                .map(String::as_str)
                .ok_or_else(|| {
                    FieldError::new("route", format!("no default route for channel {channel}"))
                })?,
        };
        let (name, info) = self
            .routes
            .get_key_value(name)
            .ok_or_else(|| FieldError::new("route", format!("unknown route `{name}`")))?;
        if !info.channels.contains(&channel) {
            return Err(FieldError::new(
                "route",
                format!("route `{name}` does not carry {channel}"),
            ));
        }
        Ok((name, info))
    }
}

/// A configured template: literal fields with `{{ placeholders }}` filled from `data`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Template {
    pub subject: Option<String>,
    pub text: Option<String>,
    pub html: Option<String>,
}

/// Renders templates strictly: a placeholder missing from `data` is an error, not a blank.
pub struct Templates {
    env: minijinja::Environment<'static>,
    templates: BTreeMap<String, Template>,
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates")
            .field("names", &self.templates.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Default for Templates {
    fn default() -> Self {
        Templates::new(BTreeMap::new())
    }
}

impl Templates {
    pub fn new(templates: BTreeMap<String, Template>) -> Self {
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.set_auto_escape_callback(|name| {
            if name.ends_with(".html") {
                minijinja::AutoEscape::Html
            } else {
                minijinja::AutoEscape::None
            }
        });
        Templates { env, templates }
    }

    /// Checks every template compiles, so a typo fails at start-up rather than on a request.
    pub fn check(&self) -> Result<(), String> {
        for (name, t) in &self.templates {
            for source in [&t.subject, &t.text, &t.html].into_iter().flatten() {
                self.env
                    .template_from_str(source)
                    .map_err(|e| format!("template `{name}`: {e}"))?;
            }
        }
        Ok(())
    }

    /// Whether a template of this name is configured.
    pub fn has(&self, name: &str) -> bool {
        self.templates.contains_key(name)
    }

    /// Whether `source` compiles as a template of its own (a mapping's `to`, say).
    pub fn check_str(&self, source: &str) -> Result<(), String> {
        self.env
            .template_from_str(source)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// Renders a one-off template, as strictly as the named ones; `what` names it in errors.
    pub fn render_str(
        &self,
        what: &str,
        source: &str,
        data: &Map<String, Value>,
    ) -> Result<String, FieldError> {
        self.env
            .render_str(source, data)
            .map_err(|e| FieldError::new("data", render_error(what, source, &e)))
    }

    pub fn render(&self, name: &str, data: &Map<String, Value>) -> Result<Template, FieldError> {
        let template = self
            .templates
            .get(name)
            .ok_or_else(|| FieldError::new("template", format!("unknown template `{name}`")))?;
        let render = |source: &Option<String>, kind: &str| -> Result<Option<String>, FieldError> {
            let Some(source) = source else {
                return Ok(None);
            };
            self.env
                .render_named_str(&format!("{name}.{kind}"), source, data)
                .map(Some)
                .map_err(|e| {
                    FieldError::new(
                        "data",
                        render_error(&format!("template `{name}`"), source, &e),
                    )
                })
        };
        Ok(Template {
            subject: render(&template.subject, "txt")?,
            text: render(&template.text, "txt")?,
            html: render(&template.html, "html")?,
        })
    }
}

/// A render error that names what was missing: strict rendering reports only "undefined
/// value", with the span of the expression at fault, which is the variable's name.
fn render_error(what: &str, source: &str, err: &minijinja::Error) -> String {
    let variable = err
        .range()
        .and_then(|range| source.get(range))
        .filter(|_| err.kind() == minijinja::ErrorKind::UndefinedError);
    match variable {
        Some(variable) => format!("{what}: `{variable}` is not defined in data"),
        None => format!("{what}: {err}"),
    }
}
