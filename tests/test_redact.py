"""Credential redaction: known answers for URLs with user info and secret query parameters, text without URLs left
alone, nested structures, and log records."""

import logging

import pytest

from gpubench.output.redact import install_log_redaction, redact, redact_tree


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://alice:SECRETPW42@host:5000", "http://alice:***@host:5000"),
        ("tracking.uri=https://alice:p%40ss@mlflow.example/api", "tracking.uri=https://alice:***@mlflow.example/api"),
        ("https://ghp_TOKEN123@host/x", "https://***@host/x"),
        ("postgresql://user:pw@db:5432/mlflow", "postgresql://user:***@db:5432/mlflow"),
        ("https://host/x?token=SECRET&run=3", "https://host/x?token=***&run=3"),
        ("https://host/x?a=1&api_key=SECRET#frag", "https://host/x?a=1&api_key=***#frag"),
        ("s3://b/k?X-Amz-Signature=abc123&X-Amz-Credential=AKIA", "s3://b/k?X-Amz-Signature=***&X-Amz-Credential=***"),
        ("uri: 'http://a:b@h:1' and \"http://c:d@h:2\"", "uri: 'http://a:***@h:1' and \"http://c:***@h:2\""),
        # Hydra's escaped form of a sweep's override value.
        ("tracking.uri=http\\://alice\\:SECRET@127.0.0.1\\:5000", "tracking.uri=http\\://alice\\:***@127.0.0.1\\:5000"),
        ("https\\://h/x?token\\=SECRET", "https\\://h/x?token\\=***"),
        # Nothing secret: unchanged.
        ("sqlite:///mlruns/mlflow.db", "sqlite:///mlruns/mlflow.db"),
        ("sqlite:////home/a@b/mlflow.db", "sqlite:////home/a@b/mlflow.db"),
        ("http://127.0.0.1:5000/?experiment=3", "http://127.0.0.1:5000/?experiment=3"),
        ("model=mlp epochs=3 user@example.com", "model=mlp epochs=3 user@example.com"),
    ],
)
def test_redact_masks_credentials_and_nothing_else(text, expected):
    assert redact(text) == expected


def test_redact_tree_reaches_every_string_and_keeps_the_shape():
    tree = {"run": {"overrides": ["tracking.uri=http://a:SECRET@h"], "n": 3, "t": ("http://b:SECRET@h",)}}
    assert redact_tree(tree) == {
        "run": {"overrides": ["tracking.uri=http://a:***@h"], "n": 3, "t": ("http://b:***@h",)}
    }


def test_log_records_are_redacted_as_they_are_created(monkeypatch):
    # From the plain factory (an in-process run earlier in the session may have installed it already); the
    # session's factory is restored after the test.
    original = logging.LogRecord
    monkeypatch.setattr(logging, "_logRecordFactory", original)
    install_log_redaction()
    installed = logging.getLogRecordFactory()
    install_log_redaction()  # once only: the factory is not wrapped twice
    assert logging.getLogRecordFactory() is installed is not original
    record = logging.getLogger("hydra.launcher").makeRecord(
        "hydra.launcher", logging.INFO, __file__, 1, "\t#%d : %s", (0, "tracking.uri=http\\://a\\:S@h"), None
    )
    assert record.getMessage() == "\t#0 : tracking.uri=http\\://a\\:***@h"
