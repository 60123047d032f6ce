"""A gate finding: what is missing or mutable, where, how bad, and how to fix it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Severity = Literal["blocking", "warning"]


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str  # stable id, e.g. "data.mutable_version"
    path: str  # field path in the record, e.g. "data.train.version"
    severity: Severity
    message: str
    hint: str

    @property
    def blocking(self) -> bool:
        return self.severity == "blocking"

    def __str__(self) -> str:
        # a dash, not a colon, after the path: "credentials.pin: a secret-looking value" would read as a key and its
        # value to the redaction every output line passes through, and lose its word "a"
        return f"[{self.severity}] {self.path} — {self.message} (fix: {self.hint})"
