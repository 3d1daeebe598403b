"""The inbound hook's URL is the only credential of SendGrid's and Mailgun's inbound mail: no log line shows its id,
whether uvicorn's access line (whose formatter reads the arguments apart), an error line's path or a traceback."""

import logging

from app.kit import logs

HOOK = "/outcomes/hooks/src_7Hk2secretsecret/inbound"


def record(msg: str, args: tuple, exc_info=None) -> logging.LogRecord:
    return logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, msg, args, exc_info)


def test_an_access_line_keeps_its_arguments_apart_with_the_id_redacted():
    line = record('%s - "%s %s HTTP/%s" %d', ("127.0.0.1:5000", "POST", HOOK, "1.1", 503))
    assert logs.HookUrls().filter(line)
    assert line.args == ("127.0.0.1:5000", "POST", "/outcomes/hooks/***/inbound", "1.1", 503)
    assert "src_7Hk2" not in line.getMessage()


def test_an_error_line_and_its_traceback_are_redacted():
    try:
        raise RuntimeError(f"database unavailable while handling {HOOK}")
    except RuntimeError as exc:
        line = record("database unavailable on %s %s", ("POST", HOOK), (type(exc), exc, exc.__traceback__))
    logs.HookUrls().filter(line)
    printed = logging.Formatter().format(line)
    assert "src_7Hk2" not in printed and "/outcomes/hooks/***" in printed


def test_install_puts_the_filter_on_the_access_and_error_loggers_and_the_last_resort():
    logs.install()
    for name in ("uvicorn.access", "uvicorn.error", "codreamer"):
        assert any(isinstance(f, logs.HookUrls) for f in logging.getLogger(name).filters)
    assert any(isinstance(f, logs.HookUrls) for f in logging.lastResort.filters)
