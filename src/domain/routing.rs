//! Which route carries a notification, what delivery policy it defaults to, and the templates
//! that may stand in for literal content. Built from configuration at start-up.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use super::{AttachmentRules, Categories, Channel, Delivery, FieldError};

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
    /// The route's vendor takes an email's attachments.
    pub attachments: bool,
    /// The tenant whose operators pause and resume it ([`operator_of`]); `None`: nobody's, by
    /// the API (a route shared by tenants whose config names no operator).
    pub operator: Option<String>,
}

/// Which tenant operates a route: the one its config names (`operated_by`); else the only
/// tenant it keeps to; else the only tenant `serves` holds (the tenants of every token). A
/// route shared by several tenants with none named is nobody's to pause: one tenant's
/// operator must not hold another's mail.
pub fn operator_of(
    operated_by: Option<&str>,
    tenants: Option<&[String]>,
    serves: &std::collections::BTreeSet<&str>,
) -> Option<String> {
    let only = |mut names: Vec<&str>| (names.len() == 1).then(|| names.remove(0).to_owned());
    operated_by
        .map(str::to_owned)
        .or_else(|| tenants.and_then(|t| only(t.iter().map(String::as_str).collect())))
        .or_else(|| only(serves.iter().copied().collect()))
}

impl RouteInfo {
    /// Whether `tenant` operates it ([`operator_of`]).
    pub fn operated_by(&self, tenant: &str) -> bool {
        self.operator.as_deref() == Some(tenant)
    }

    /// Whether `tenant` may send through it: it does not keep to other tenants.
    pub fn admits(&self, tenant: &str) -> bool {
        self.tenants
            .as_ref()
            .is_none_or(|t| t.iter().any(|t| t == tenant))
    }
}

/// Which routes the enqueue path may choose: their names, the channels each serves, and the
/// default route of each channel; and the categories a notification may be sent in.
/// (`dispatch::Routes` holds the same routes at run time.)
#[derive(Debug, Clone, Default)]
pub struct Routing {
    routes: BTreeMap<String, RouteInfo>,
    defaults: HashMap<Channel, String>,
    categories: Categories,
    attachments: AttachmentRules,
}

impl Routing {
    pub fn new(routes: BTreeMap<String, RouteInfo>, defaults: HashMap<Channel, String>) -> Self {
        Routing {
            routes,
            defaults,
            categories: Categories::default(),
            attachments: AttachmentRules::default(),
        }
    }

    /// With the categories a notification may be sent in.
    pub fn with_categories(self, categories: Categories) -> Self {
        Routing { categories, ..self }
    }

    /// With the attachments an email may carry.
    pub fn with_attachments(self, attachments: AttachmentRules) -> Self {
        Routing {
            attachments,
            ..self
        }
    }

    /// What attachments an email may carry.
    pub fn attachments(&self) -> &AttachmentRules {
        &self.attachments
    }

    /// The categories a notification may be sent in, and their unsubscribe links.
    pub fn categories(&self) -> &Categories {
        &self.categories
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

/// An operator's pause of a route: no process starts a call on it until a person resumes it.
/// Its work waits, or goes to the route's fallback where the operator said so.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutePause {
    pub route: String,
    /// Who paused it (the token's principal), and why.
    pub principal: String,
    pub note: String,
    /// Its work goes to the route's fallback (`true`) rather than waiting for the resume.
    pub to_fallback: bool,
    pub at: time::OffsetDateTime,
}

/// A configured template: literal fields with `{{ placeholders }}` filled from `data`, and
/// the same in other languages.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Template {
    pub subject: Option<String>,
    pub text: Option<String>,
    pub html: Option<String>,
    /// By locale (`fr`, `fr-CA`): the same fields, translated. A notification's `locale`
    /// chooses one, falling back from `fr-CA` to `fr` to these fields.
    #[serde(default)]
    pub locales: BTreeMap<String, Localized>,
    /// The language these fields are written in (`en`): a `locale` it serves (`en`, `en-GB`)
    /// renders them as asked, not as a fallback.
    pub locale: Option<String>,
}

/// A template's fields in one locale.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Localized {
    pub subject: Option<String>,
    pub text: Option<String>,
    pub html: Option<String>,
}

impl Template {
    /// The fields in the default language.
    fn fields(&self) -> Localized {
        Localized {
            subject: self.subject.clone(),
            text: self.text.clone(),
            html: self.html.clone(),
        }
    }

    /// The configured locale that serves `locale`: itself, else each shorter tag it
    /// falls back to (`fr-CA` → `fr`), compared without regard to case; `None` for the default.
    fn locale_for(&self, locale: &str) -> Option<&str> {
        tags(locale).find_map(|tag| {
            self.locales
                .keys()
                .find(|k| k.eq_ignore_ascii_case(tag))
                .map(String::as_str)
        })
    }

    /// Whether the default fields are in the language `locale` asks for (or one it falls
    /// back to): rendering them then is what was asked, not a fallback.
    fn default_serves(&self, locale: &str) -> bool {
        self.locale
            .as_deref()
            .is_some_and(|own| tags(locale).any(|tag| tag.eq_ignore_ascii_case(own)))
    }
}

/// A language tag and each shorter one it falls back to: `fr-CA`, then `fr`.
fn tags(locale: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(Some(locale), |tag| tag.rfind('-').map(|at| &tag[..at]))
}

impl Localized {
    /// Each field's source, by the name its rendering uses.
    fn sources(&self) -> [(&'static str, Option<&str>); 3] {
        [
            ("subject", self.subject.as_deref()),
            ("text", self.text.as_deref()),
            ("html", self.html.as_deref()),
        ]
    }
}

/// A template rendered for one notification.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rendered {
    pub subject: Option<String>,
    pub text: Option<String>,
    pub html: Option<String>,
    /// The configured locale rendered; `None` for the default.
    pub locale: Option<String>,
    /// A `locale` was asked for that no translation serves: the default was rendered.
    pub locale_fallback: bool,
}

/// Whether `tag` reads as a language tag (BCP 47's shape: `fr`, `fr-CA`, `zh-Hant-TW`):
/// subtags of 1 to 8 ASCII letters or digits joined by `-`, the first of letters, at most 35
/// characters in all.
pub fn locale_tag(tag: &str) -> bool {
    let mut subtags = tag.split('-');
    let first_is_letters = subtags
        .next()
        .is_some_and(|s| (1..=8).contains(&s.len()) && s.chars().all(|c| c.is_ascii_alphabetic()));
    tag.len() <= 35
        && first_is_letters
        && subtags
            .all(|s| (1..=8).contains(&s.len()) && s.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// How a chat message's text escapes what `data` puts in it. Slack reads `<!channel>`,
/// `<@U…>` and `<url|label>` in a message's text as commands (a ping of everyone, a mention, a
/// link with any label), and `&`, `<` and `>` as their escapes: data from an end user must not
/// be able to write them. The template's own text may.
const SLACK_TEXT: minijinja::AutoEscape = minijinja::AutoEscape::Custom("slack");

/// Renders templates strictly: a placeholder missing from `data` is an error, not a blank.
pub struct Templates {
    env: minijinja::Environment<'static>,
    templates: BTreeMap<String, Template>,
    /// `[templates] strict_locales`: a `locale` no translation serves is refused rather than
    /// rendered in the default language.
    strict_locales: bool,
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
            } else if name.ends_with(".chat") {
                SLACK_TEXT
            } else {
                minijinja::AutoEscape::None
            }
        });
        env.set_formatter(|out, state, value| {
            if state.auto_escape() != SLACK_TEXT || value.is_safe() {
                return minijinja::escape_formatter(out, state, value);
            }
            let text = value.to_string();
            let escaped = text
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;");
            out.write_str(&escaped).map_err(minijinja::Error::from)
        });
        Templates {
            env,
            templates,
            strict_locales: false,
        }
    }

    /// Refuses a `locale` that no translation of the template serves (`[templates]
    /// strict_locales = true`), instead of rendering the default language.
    pub fn strict_locales(mut self, strict: bool) -> Self {
        self.strict_locales = strict;
        self
    }

    /// Checks every template compiles, so a typo fails at start-up rather than on a request;
    /// and that each locale gives the same fields as the default, and uses no variable the
    /// default does not: data an upstream sends for the default must render every language.
    pub fn check(&self) -> Result<(), String> {
        for (name, t) in &self.templates {
            let default = self
                .variables(&t.fields())
                .map_err(|e| format!("template `{name}`: {e}"))?;
            if let Some(own) = t.locale.as_deref().filter(|own| !locale_tag(own)) {
                return Err(format!(
                    "template `{name}`: locale `{own}` is not a language tag (e.g. `en`)"
                ));
            }
            for (locale, fields) in &t.locales {
                let at = format!("template `{name}` locale `{locale}`");
                if !locale_tag(locale) {
                    return Err(format!("{at}: not a language tag (e.g. `fr` or `fr-CA`)"));
                }
                for ((field, theirs), (_, ours)) in
                    fields.sources().into_iter().zip(t.fields().sources())
                {
                    if theirs.is_some() != ours.is_some() {
                        return Err(format!(
                            "{at}: `{field}` must be given exactly where the default gives it"
                        ));
                    }
                }
                let used = self.variables(fields).map_err(|e| format!("{at}: {e}"))?;
                if let Some(extra) = used.iter().find(|v| !default.contains(*v)) {
                    return Err(format!(
                        "{at}: uses `{extra}`, which the default does not, so data made for the \
                         default may not render it"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The variables `fields` read, once each compiles.
    fn variables(&self, fields: &Localized) -> Result<std::collections::BTreeSet<String>, String> {
        let mut used = std::collections::BTreeSet::new();
        for (field, source) in fields.sources() {
            let Some(source) = source else { continue };
            let compiled = self
                .env
                .template_from_str(source)
                .map_err(|e| format!("{field}: {e}"))?;
            used.extend(compiled.undeclared_variables(false));
        }
        Ok(used)
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

    /// Renders template `name` in the configured locale that serves `locale`, or its default,
    /// for `channel`: on chat, what `data` puts in the text is escaped as Slack escapes it.
    pub fn render(
        &self,
        name: &str,
        locale: Option<&str>,
        data: &Map<String, Value>,
        channel: Channel,
    ) -> Result<Rendered, FieldError> {
        let template = self
            .templates
            .get(name)
            .ok_or_else(|| FieldError::new("template", format!("unknown template `{name}`")))?;
        let asked = locale;
        let locale = locale.and_then(|l| template.locale_for(l));
        let locale_fallback =
            asked.is_some_and(|asked| locale.is_none() && !template.default_serves(asked));
        if let Some(asked) = asked.filter(|_| locale_fallback && self.strict_locales) {
            let served: Vec<&str> = template.locales.keys().map(String::as_str).collect();
            return Err(FieldError::new(
                "locale",
                format!(
                    "no translation of template `{name}` serves `{asked}` (it has: {}), and \
                     [templates] strict_locales refuses the default language",
                    if served.is_empty() {
                        "none".to_owned()
                    } else {
                        served.join(", ")
                    }
                ),
            ));
        }
        let fields = match locale {
            Some(locale) => template.locales[locale].clone(),
            None => template.fields(),
        };
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
        Ok(Rendered {
            subject: render(&fields.subject, "txt")?,
            text: render(
                &fields.text,
                if channel == Channel::Chat {
                    "chat"
                } else {
                    "txt"
                },
            )?,
            html: render(&fields.html, "html")?,
            locale: locale.map(str::to_owned),
            locale_fallback,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_is_operated_by_the_tenant_named_else_its_only_one_else_nobody() {
        let two = std::collections::BTreeSet::from(["acme", "globex"]);
        let one = std::collections::BTreeSet::from(["acme"]);
        let globex = ["globex".to_owned()];
        let both = ["acme".to_owned(), "globex".to_owned()];
        let cases = [
            (Some("acme"), None, &two, Some("acme")),
            (None, Some(&globex[..]), &two, Some("globex")),
            (None, Some(&both[..]), &two, None),
            (None, None, &two, None),
            (None, None, &one, Some("acme")),
        ];
        for (named, tenants, serves, operator) in cases {
            assert_eq!(
                operator_of(named, tenants, serves).as_deref(),
                operator,
                "{named:?} {tenants:?} {serves:?}"
            );
        }
    }

    fn template(locale: Localized) -> Templates {
        Templates::new(BTreeMap::from([(
            "code".to_string(),
            Template {
                subject: Some("Your code".into()),
                text: Some("{{ code }}, {{ user.name }}".into()),
                html: None,
                locales: BTreeMap::from([("fr-CA".to_string(), locale)]),
                locale: None,
            },
        )]))
    }

    #[test]
    fn a_templates_own_language_must_be_a_language_tag() {
        let own = |locale: &str| {
            Templates::new(BTreeMap::from([(
                "code".to_string(),
                Template {
                    text: Some("{{ code }}".into()),
                    locale: Some(locale.to_owned()),
                    ..Template::default()
                },
            )]))
            .check()
        };
        assert_eq!(own("en-GB"), Ok(()));
        assert_eq!(
            own("en_GB"),
            Err("template `code`: locale `en_GB` is not a language tag (e.g. `en`)".to_owned())
        );
    }

    #[test]
    fn a_locale_is_checked_against_the_default_at_start_up() {
        let fr = |subject: Option<&str>, text: &str, html: Option<&str>| Localized {
            subject: subject.map(str::to_owned),
            text: Some(text.to_owned()),
            html: html.map(str::to_owned),
        };
        let good = fr(Some("Votre code"), "{{ code }}, {{ user.first }}", None);
        assert_eq!(template(good).check(), Ok(()));
        for (locale, error) in [
            (
                fr(Some("Votre code"), "{{ code }} {{ expires }}", None),
                "template `code` locale `fr-CA`: uses `expires`, which the default does not, so \
                 data made for the default may not render it",
            ),
            (
                fr(Some("Votre code"), "{{ code ", None),
                "template `code` locale `fr-CA`: text: syntax error: unexpected end of input, \
                 expected end of variable block (in <string>:1)",
            ),
            (
                fr(None, "{{ code }}", None),
                "template `code` locale `fr-CA`: `subject` must be given exactly where the \
                 default gives it",
            ),
            (
                fr(Some("Votre code"), "{{ code }}", Some("<p>{{ code }}</p>")),
                "template `code` locale `fr-CA`: `html` must be given exactly where the default \
                 gives it",
            ),
        ] {
            assert_eq!(template(locale).check(), Err(error.to_owned()));
        }
        let mut bad_tag = Template::default();
        bad_tag.locales.insert("fr_CA".into(), Localized::default());
        let templates = Templates::new(BTreeMap::from([("t".to_string(), bad_tag)]));
        assert_eq!(
            templates.check(),
            Err("template `t` locale `fr_CA`: not a language tag (e.g. `fr` or `fr-CA`)".into())
        );
    }
}
