use std::time::Duration;

use super::routes::ProviderConfig;
use super::*;

fn load(toml_text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigProblems> {
    let dir = std::env::temp_dir().join(format!("herald-config-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("herald.toml");
    std::fs::write(&path, toml_text).unwrap();
    let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string()));
    let config = Config::load(Some(&path), env);
    std::fs::remove_dir_all(dir).unwrap();
    config
}

#[test]
fn a_webhook_route_never_fails_over() {
    let secret = "whsec_YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWE=";
    let text = format!(
        "[routes.public]\nprovider = \"webhook\"\nsecrets = [\"{secret}\"]\n\
         fallback = \"internal\"\n\
         [routes.internal]\nprovider = \"webhook\"\nsecrets = [\"{secret}\"]\n\
         allow_private_networks = true\ntenants = [\"acme\"]\n"
    );
    let problems = load(&text, &[]).unwrap_err().to_string();
    assert!(
        problems.contains("routes.public.fallback")
            && problems.contains("a receiver's answer must not choose the route"),
        "{problems}"
    );
}

#[test]
fn durations_and_counts_that_would_overflow_or_stop_serving_are_refused() {
    for (text, key) in [
        (
            "[dispatch]\nlease_seconds = 9223372036854775807\n",
            "dispatch.lease_seconds",
        ),
        (
            "[relay]\nretention_seconds = 9223372036854775807\n",
            "relay.retention_seconds",
        ),
        (
            "[server]\nheader_timeout_seconds = 9223372036854775807\n",
            "server.header_timeout_seconds",
        ),
        ("[server]\nmax_connections = 0\n", "server.max_connections"),
        (
            "[routes.r]\nprovider = \"sandbox\"\nmax_age_seconds = 9223372036854775807\n",
            "routes.r.max_age_seconds",
        ),
        (
            "[routes.r]\nprovider = \"sandbox\"\ncallback_rate_limit_per_second = 0\n",
            "routes.r.callback_rate_limit_per_second",
        ),
    ] {
        let problems = load(text, &[]).unwrap_err().to_string();
        assert!(
            problems.contains(key) && problems.contains("out of range"),
            "{key}: {problems}"
        );
    }
    load("", &[]).expect("the defaults are in range");
}

/// A pace that a token bucket cannot keep (NaN, infinite, negative, or so slow that the
/// wait for one token overflows a clock) was taken and panicked at the first paced send,
/// leaving the route's lock poisoned: it is refused, by name.
#[test]
fn a_pace_no_clock_can_keep_is_refused_by_name() {
    let route = |rate: &str| {
        format!("[routes.r]\nprovider = \"sandbox\"\nrate_limit_per_second = {rate}\n")
    };
    for rate in ["1e-300", "-1", "nan", "inf", "-inf", "0.0001", "1e7"] {
        let problems = load(&route(rate), &[]).unwrap_err().to_string();
        assert!(
            problems.contains("routes.r.rate_limit_per_second")
                && problems.contains("out of range"),
            "{rate}: {problems}"
        );
    }
    for rate in ["0", "0.001", "2.5", "1000000"] {
        load(&route(rate), &[]).unwrap_or_else(|e| panic!("{rate}: {e}"));
    }
}

#[test]
fn a_vendor_with_a_documented_rate_paces_its_routes_unless_they_say_otherwise() {
    let route =
        |pace: &str| format!("[routes.ops]\nprovider = \"slack\"\nbot_token = \"xoxb-1\"\n{pace}");
    let paced = |pace: &str| load(&route(pace), &[]).unwrap().routes["ops"].rate_limit_per_second;
    assert_eq!(paced(""), Some(1.0), "Slack's one post a second");
    assert_eq!(paced("rate_limit_per_second = 5\n"), Some(5.0));
    assert_eq!(paced("rate_limit_per_second = 0\n"), None, "0 turns it off");
    let unpaced = "[routes.mail]\nprovider = \"resend\"\napi_key = \"k\"\nfrom = \"a@b.io\"\n";
    assert_eq!(
        load(unpaced, &[]).unwrap().routes["mail"].rate_limit_per_second,
        None
    );
}

#[test]
fn the_example_config_documents_valid_keys() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/herald.example.toml"))
        .unwrap();
    let config = load(&text, &[]).unwrap();
    assert_eq!(config.tokens.len(), 2);
    for provider in ProviderConfig::NAMES {
        assert!(
            config
                .routes
                .values()
                .any(|r| r.provider.name() == *provider),
            "herald.example.toml has no route with provider = \"{provider}\""
        );
    }
    assert_eq!(config.channels[&Channel::Webhook], "sandbox");
    assert!(config.templates.contains_key("export-ready"));
    assert_eq!(config.sinks.len(), 3, "one sink of each kind");
    assert_eq!(config.events["ExportCompleted"].len(), 1);
    assert_eq!(config.inbox_tenant().unwrap(), "acme");
}

#[test]
fn retention_keeps_keys_an_hour_at_least_and_finished_notifications_no_shorter() {
    let config = load("", &[]).unwrap();
    assert_eq!(config.retention.idempotency_seconds, 7 * 86_400);
    assert_eq!(
        config.retention.finished_seconds,
        30 * 86_400,
        "kept 30 days by default"
    );
    let config = load(
        "[retention]\nidempotency_seconds = 86400\nfinished_seconds = 0\n",
        &[],
    )
    .unwrap();
    assert_eq!(config.retention.finished_seconds, 0, "for ever, when asked");

    let err = load(
        "[retention]\nidempotency_seconds = 60\nfinished_seconds = 30\nbatch_size = 0\n",
        &[],
    )
    .unwrap_err();
    let problems = err.0.join("\n");
    for expected in [
        "retention.idempotency_seconds: must be at least 3600",
        "retention.finished_seconds: must be 0 (keep for ever) or at least \
         retention.idempotency_seconds",
        "retention.batch_size: must be at least 1",
    ] {
        assert!(
            problems.contains(expected),
            "{expected:?} not in:\n{problems}"
        );
    }
    let err = load("[retention]\nfinished_seconds = 9223372036854775807\n", &[]).unwrap_err();
    assert_eq!(err.0.len(), 1, "{err}");
    assert!(
        err.0[0].starts_with("retention.finished_seconds: must be at most 315360000 (3650 days)"),
        "{err}"
    );
}

#[test]
fn an_event_type_maps_to_one_table_or_an_array_of_them_and_unknown_keys_are_named() {
    let config = load(
        "[events.\"A\"]\ntemplate = \"t\"\nchannel = \"email\"\nto = \"{{ e }}\"\n\
         [[events.\"B\"]]\ntemplate = \"t\"\nchannel = \"sms\"\nto = \"{{ p }}\"\n\
         [[events.\"B\"]]\ntemplate = \"t\"\nchannel = \"email\"\nto = \"{{ e }}\"\n",
        &[],
    )
    .unwrap();
    assert_eq!((config.events["A"].len(), config.events["B"].len()), (1, 2));
    let err = load(
        "[events.\"A\"]\ntemplate = \"t\"\nchannel = \"email\"\nto = \"x\"\ntoo = 1\n",
        &[],
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("events.\"A\"") && err.to_string().contains("too"),
        "{err}"
    );
    let err = load(
        "[sinks.s]\nkind = \"webhook\"\nurl = \"https://h.io\"\n",
        &[],
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("sinks.s") && err.to_string().contains("secret"),
        "{err}"
    );
}

#[test]
fn no_config_means_sqlite_localhost_and_the_sandbox_for_every_channel() {
    let config = Config::load(None, []).unwrap();
    assert_eq!(config.database.url, "sqlite://herald.db");
    assert_eq!(config.server.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(config.server.max_body_bytes, 262_144);
    for channel in Channel::ALL {
        assert_eq!(config.channels[&channel], "sandbox");
    }
}

#[test]
fn environment_variables_override_nested_keys_with_typed_values() {
    let config = load(
        "[database]\nurl = \"sqlite://a.db\"\n[routes.box]\nprovider = \"sandbox\"\n",
        &[
            ("HERALD_DATABASE__URL", "postgres://postgres@127.0.0.1/x"),
            ("HERALD_SERVER__MAX_BODY_BYTES", "1024"),
            ("HERALD_ROUTES__BOX__VISIBILITY_LAG_MS", "250"),
            ("HERALD_DEV_TOKEN", "not-a-key"),
        ],
    )
    .unwrap();
    assert_eq!(config.database.url, "postgres://postgres@127.0.0.1/x");
    assert_eq!(config.server.max_body_bytes, 1024);
    assert!(matches!(
        &config.routes["box"].provider,
        ProviderConfig::Sandbox(settings) if settings.visibility_lag_ms == 250
    ));
}

#[test]
fn every_vendor_refuses_an_unknown_key_and_names_a_bad_value() {
    for provider in ProviderConfig::NAMES {
        let err = load(
            &format!("[routes.a]\nprovider = \"{provider}\"\nhots = \"x\"\n"),
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("routes.a.hots"), "{provider}: {err}");
    }
    let err = load("[routes.a]\nprovider = \"carrier-pigeon\"\n", &[]).unwrap_err();
    assert!(
        err.to_string()
            .contains("routes.a: unknown provider `carrier-pigeon`"),
        "{err}"
    );
    let err = load(
        "[routes.mail]\nprovider = \"smtp\"\nhost = \"h\"\nfrom = \"a@b.example\"\ntls = \"ssl\"\n\
         [routes.box]\nprovider = \"sandbox\"\nprofile = \"sometimes\"\n",
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("routes.mail.tls: unknown variant `ssl`"),
        "{err}"
    );
    assert!(
        err.contains(
            "routes.box.profile: unknown sandbox profile `sometimes`: expected idempotent, \
             queryable or plain"
        ),
        "{err}"
    );
}

#[test]
fn a_value_of_the_wrong_type_is_named_but_never_quoted() {
    let err = load(
        "[routes.hooks]\nprovider = \"webhook\"\nsecrets = [{ env = \"S\" }]\n",
        &[("HERALD_ROUTES__HOOKS__SECRETS", "\"whsec_canary7f3a\"")],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("routes.hooks.secrets: invalid type: a string, expected a sequence"),
        "{err}"
    );
    assert!(!err.contains("canary7f3a"), "{err}");
}

#[test]
fn unknown_keys_are_refused_with_their_name() {
    let err = load("[server]\nlisten = \"127.0.0.1:1\"\nlistn = 3\n", &[]).unwrap_err();
    assert!(err.to_string().contains("listn"), "{err}");
    let err = load("[routes.a]\nprovider = \"sandbox\"\nhots = \"x\"\n", &[]).unwrap_err();
    assert!(
        err.to_string().contains("routes.a") && err.to_string().contains("hots"),
        "{err}"
    );
}

#[test]
fn a_sandbox_route_may_stand_in_for_some_channels_only() {
    let mail = "[routes.mail]\nprovider = \"sandbox\"\nchannels = [\"email\"]\n";
    let config = load(&format!("{mail}[channels]\nemail = \"mail\"\n"), &[]).unwrap();
    assert_eq!(
        config.routes["mail"].provider.settings().channels(),
        [Channel::Email]
    );
    let err = load(&format!("{mail}[channels]\nsms = \"mail\"\n"), &[]).unwrap_err();
    assert!(
        err.to_string()
            .contains("channels.sms: route `mail` does not carry sms"),
        "{err}"
    );
    let err = load(
        "[routes.mail]\nprovider = \"sandbox\"\nchannels = [\"fax\"]\n",
        &[],
    )
    .unwrap_err();
    assert!(err.to_string().contains("routes.mail.channels"), "{err}");
}

#[test]
fn strict_locales_is_a_setting_beside_the_templates_it_governs() {
    let template = "[templates.code]\ntext = \"{{ code }}\"\n";
    let config = load(
        &format!("[templates]\nstrict_locales = true\n{template}"),
        &[],
    )
    .unwrap();
    assert!(config.strict_locales);
    assert_eq!(config.templates.keys().collect::<Vec<_>>(), ["code"]);
    assert!(!load(template, &[]).unwrap().strict_locales);
    let err = load("[templates]\nstrict_locales = \"yes\"\n", &[]).unwrap_err();
    assert!(
        err.to_string()
            .contains("templates.strict_locales: must be true or false"),
        "{err}"
    );
}

#[test]
fn every_unknown_key_of_every_table_is_named_with_the_nearest_valid_key() {
    let err = load(
        "[server]\nlistn = \"127.0.0.1:1\"\nmax_body_byte = 3\n\
         [routes.mail]\nprovider = \"smtp\"\nhots = \"smtp.example\"\nprot = 25\n\
         rate_limit_per_secnd = 2\nzzz = 1\n\
         [[tokens]]\nname = \"a\"\ntenant = \"t\"\nscope = [\"send\"]\nsecret = \"x\"\n",
        &[],
    )
    .unwrap_err();
    let problems = err.0.join("\n");
    for expected in [
        "server.listn: unknown field `listn`, did you mean `listen`?",
        "server.max_body_byte: unknown field `max_body_byte`, did you mean `max_body_bytes`?",
        "routes.mail.hots: unknown field `hots`, did you mean `host`?",
        "routes.mail.prot: unknown field `prot`, did you mean `port`?",
        // A key every provider takes is weighed as much as the vendor's own.
        "routes.mail.rate_limit_per_secnd: unknown field `rate_limit_per_secnd`, did you mean \
         `rate_limit_per_second`?",
        "tokens[0].scope: unknown field `scope`, did you mean `scopes`?",
    ] {
        assert!(
            problems.contains(expected),
            "{expected:?} not in:\n{problems}"
        );
    }
    // Nothing is near: every key of the table is listed instead.
    assert!(
        problems.contains(
            "routes.mail.zzz: unknown field `zzz`, expected one of `allowed_from`, `burst`"
        ),
        "{problems}"
    );
    // `host` and `scopes` are missing too, which their misspellings already say.
    assert_eq!(err.0.len(), 7, "{problems}");
    // A missing key no unknown one is near is named as missing.
    let err = load("[routes.mail]\nprovider = \"smtp\"\nzzz = 1\n", &[]).unwrap_err();
    assert!(
        err.to_string()
            .contains("routes.mail: missing field `host`"),
        "{err}"
    );
}

#[test]
fn every_problem_is_reported_at_once_with_its_key_and_where_it_came_from() {
    let err = load(
        "[server]\nlistn = 3\n\
         [routes.mail]\nprovider = \"smtp\"\nhots = \"smtp.example\"\n\
         [routes.box]\nprovider = \"sandbox\"\n\
         [channels]\nsms = \"nowhere\"\n\
         [dispatch]\nbatch_size = 0\n",
        &[
            ("HERALD_ROUTES__BOX__VISIBILITY_LAG_MS", "\"soon\""),
            ("HERALD_DATABASE__MAX_CONECTIONS", "5"),
        ],
    )
    .unwrap_err();
    let problems = err.0.join("\n");
    for expected in [
        "server.listn: unknown field `listn`",
        "routes.mail.hots: unknown field `hots`",
        "routes.box.visibility_lag_ms: invalid type: a string, expected u64",
        "set by HERALD_ROUTES__BOX__VISIBILITY_LAG_MS",
        "database.max_conections: unknown field `max_conections`",
        "set by HERALD_DATABASE__MAX_CONECTIONS",
        "channels.sms: names unknown route `nowhere`",
        "dispatch.batch_size: 0 is out of range: must be from 1 to 100000",
    ] {
        assert!(
            problems.contains(expected),
            "{expected:?} not in:\n{problems}"
        );
    }
    assert_eq!(err.0.len(), 6, "{problems}");
    assert!(
        err.0[0].starts_with("server.listn") && err.0[0].ends_with("herald.toml)"),
        "a problem in the file names the file: {problems}"
    );
}

#[test]
fn allowed_from_takes_addresses_and_domains_on_email_routes_only() {
    let config = load(
        "[routes.mail]\nprovider = \"sandbox\"\nallowed_from = [\"a@acme.example\", \"@news.acme.example\"]\n",
        &[],
    )
    .unwrap();
    assert_eq!(config.routes["mail"].allowed_from.len(), 2);
    let err = load(
        "[routes.mail]\nprovider = \"sandbox\"\nallowed_from = [\"acme.example\", \"@\"]\n\
         [routes.texts]\nprovider = \"twilio\"\naccount_sid = \"AC1\"\nauth_token = \"t\"\n\
         from = \"+14155550100\"\nallowed_from = [\"@acme.example\"]\n",
        &[],
    )
    .unwrap_err();
    let problems = err.0.join("\n");
    for expected in [
        "routes.mail.allowed_from: `acme.example` is neither an email address nor an @domain",
        "routes.mail.allowed_from: `@` is neither an email address nor an @domain",
        "routes.texts.allowed_from: is only used on a route that sends email",
    ] {
        assert!(
            problems.contains(expected),
            "{expected:?} not in:\n{problems}"
        );
    }
}

#[test]
fn a_fallback_is_a_route_that_carries_the_same_channels_without_a_loop() {
    let config = load(
        "[routes.a]\nprovider = \"sandbox\"\nfallback = \"b\"\ncircuit_failures = 2\n\
         circuit_open_seconds = 9\nallowed_from = [\"Billing@Acme.example\"]\n\
         [routes.b]\nprovider = \"sandbox\"\nallowed_from = [\"@acme.example\"]\n",
        &[],
    )
    .unwrap();
    let a = &config.routes["a"];
    assert_eq!(a.fallback.as_deref(), Some("b"));
    assert_eq!(
        (a.circuit_failures, a.circuit_open),
        (2, Duration::from_secs(9))
    );
    assert_eq!(config.routes["b"].circuit_failures, 5, "the default");
    let err = load(
        "[routes.a]\nprovider = \"sandbox\"\nfallback = \"b\"\n\
         [routes.b]\nprovider = \"sandbox\"\nfallback = \"a\"\n\
         [routes.c]\nprovider = \"sandbox\"\nfallback = \"nowhere\"\n\
         [routes.d]\nprovider = \"sandbox\"\nfallback = \"texts\"\n\
         [routes.e]\nprovider = \"sandbox\"\nfallback = \"f\"\nallowed_from = [\"@acme.example\"]\n\
         [routes.f]\nprovider = \"sandbox\"\ntenants = [\"acme\"]\n\
         [routes.texts]\nprovider = \"twilio\"\naccount_sid = \"AC1\"\nauth_token = \"t\"\n\
         from = \"+14155550100\"\n",
        &[],
    )
    .unwrap_err();
    let problems = err.0.join("\n");
    for expected in [
        "routes.a.fallback: the chain loops: a → b → a",
        "routes.b.fallback: the chain loops: b → a → b",
        "routes.c.fallback: names unknown route `nowhere`",
        "routes.d.fallback: route `texts` does not carry email, push, webhook, chat as `d` does",
        "routes.e.fallback: route `f` names its tenants; it must allow every tenant `e` allows",
        "routes.e.fallback: route `f` must also list in allowed_from what `e` lists: @acme.example",
    ] {
        assert!(
            problems.contains(expected),
            "{expected:?} not in:\n{problems}"
        );
    }
}

#[test]
fn a_routes_operator_is_a_tenant_that_may_use_it() {
    let tokens = "[[tokens]]\nname = \"a\"\ntenant = \"acme\"\nscopes = [\"operate\"]\n\
         secret = \"acme-0123456789abcdef0123456789abcdef\"\nroutes = [\"*\"]\n\
         [[tokens]]\nname = \"g\"\ntenant = \"globex\"\nscopes = [\"send\"]\n\
         secret = \"globex-0123456789abcdef0123456789abcdef\"\nroutes = [\"*\"]\n";
    let config = load(
        &format!("{tokens}[routes.shared]\nprovider = \"sandbox\"\noperated_by = \"acme\"\n"),
        &[],
    )
    .unwrap();
    assert_eq!(config.routes["shared"].operated_by.as_deref(), Some("acme"));
    let err = load(
        &format!(
            "{tokens}[routes.x]\nprovider = \"sandbox\"\noperated_by = \"initech\"\n\
             [routes.y]\nprovider = \"sandbox\"\ntenants = [\"acme\"]\noperated_by = \"globex\"\n"
        ),
        &[],
    )
    .unwrap_err();
    let problems = err.0.join("\n");
    for expected in [
        "routes.x.operated_by: names `initech`, which no token has",
        "routes.y.operated_by: names `globex`, which is not among the route's tenants",
    ] {
        assert!(
            problems.contains(expected),
            "{expected:?} not in:\n{problems}"
        );
    }
}

#[test]
fn attachments_take_a_bounded_size_and_mime_types() {
    let config = load(
        "[attachments]\nmax_total_bytes = 2048\ncontent_types = [\"Application/PDF\"]\n",
        &[],
    )
    .unwrap();
    let rules = config.attachments.rules();
    assert_eq!(rules.max_total_bytes, 2048);
    assert_eq!(
        rules.content_types.into_iter().collect::<Vec<_>>(),
        ["application/pdf"]
    );
    let err = load(
        "[attachments]\nmax_total_bytes = 0\ncontent_types = [\"pdf\", \"text/plain\", \"a/b c\"]\n",
        &[],
    )
    .unwrap_err();
    let problems = err.0.join("\n");
    for expected in [
        "attachments.max_total_bytes: must be 1 to 67108864",
        "attachments.content_types[0]: `pdf` is not a MIME type",
        "attachments.content_types[2]: `a/b c` is not a MIME type",
    ] {
        assert!(
            problems.contains(expected),
            "{expected:?} not in:\n{problems}"
        );
    }
    assert!(!problems.contains("content_types[1]"), "{problems}");
}

#[test]
fn a_timeout_that_outlasts_the_lease_is_refused() {
    let err = load(
        "[dispatch]\nlease_seconds = 5\n[routes.a]\nprovider = \"sandbox\"\ntimeout_seconds = 10\n",
        &[],
    )
    .unwrap_err();
    assert!(err.to_string().contains("lease_seconds"), "{err}");
}

#[test]
fn a_channel_default_must_name_a_route_that_carries_it() {
    let err = load(
        "[channels]\nemail = \"nope\"\n[routes.a]\nprovider = \"sandbox\"\n",
        &[],
    )
    .unwrap_err();
    assert!(err.to_string().contains("unknown route"), "{err}");
}

#[test]
fn token_secrets_come_from_the_environment_and_stay_redacted() {
    let config = load(
        "[[tokens]]\nname = \"billing\"\ntenant = \"acme\"\nscopes = [\"send\"]\nsecret = { env = \"HERALD_TEST_TOKEN_SECRET_X\" }\n",
        &[],
    )
    .unwrap();
    let err = config.tokens[0]
        .secret
        .resolve("token billing")
        .unwrap_err();
    assert!(err.to_string().contains("HERALD_TEST_TOKEN_SECRET_X"));
    let literal = SecretSource::Literal(secrecy::SecretString::from("canary-secret-1"));
    assert!(!format!("{literal:?}").contains("canary-secret-1"));
}
