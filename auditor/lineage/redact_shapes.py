"""Credential shapes for the one redactor (``auditor.lineage.redact``): its own regexes, detect-secrets' plugins, and
the literals of the first look (a line holding none of them, nor a base64 run, is not examined further).

Its own: provider token shapes detect-secrets lacks or finds only in some places (Databricks, Google, Azure
DevOps, Hugging Face, OpenAI-style, GitHub tokens inside a branch name, JWTs with their signature). Pure: no I/O.
"""

from __future__ import annotations

import functools
import re

# Azure DevOps PATs: 52 characters of base32 (a letter past f, so never a hex digest), or 84 with "AZDO"
_BARE = [re.compile(r"(?<![A-Za-z0-9])(?=[a-z2-7]{0,51}[g-z])[a-z2-7]{52}(?![A-Za-z0-9])"),
         re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]{76}AZDO[A-Za-z0-9]{4}(?![A-Za-z0-9])")]
BARE_LOOK = re.compile(r"[a-z2-7]{52}|AZDO")
OWN = [
    re.compile(r"\b(AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}\b"),  # AWS access key ids
    re.compile(r"\bbearer\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE),
    re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),  # JWT, signature included
    re.compile(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub tokens (also inside a branch name)
    re.compile(r"(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9-]{10,}"),  # Slack tokens
    re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{20,}"),  # OpenAI-style API secret keys (sk-proj-…)
    re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{20,}"),  # Hugging Face tokens
    re.compile(r"(?<![A-Za-z0-9])dapi[0-9a-f]{32}(?:-\d+)?"),  # Databricks personal access tokens
    re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}"),  # Google API keys
    *_BARE,
]


@functools.cache
def detectors() -> list[tuple[tuple[str, ...], list[tuple[re.Pattern[str], int]]]]:
    """(literals one of which the line must hold, [(regex, group holding the secret)]) from detect-secrets' plugins.

    The plugins whose shapes start with a literal, each run only on a line holding it (their
    case-insensitive alternations cost a tenth of a millisecond a line). Left out: the entropy detectors
    (they flag digests), PrivateKeyDetector (it finds only the BEGIN line; the redactor takes the whole
    block), and the bare-alphanumeric shapes (Discord, Telegram, Twilio, Mailchimp, Artifactory).
    """
    from detect_secrets.plugins import keyword
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.basic_auth import BasicAuthDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.npm import NpmDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector

    plugins = [
        (("akia", "asia", "a3t", "abia", "acca", "aws"), AWSKeyDetector), (("accountkey",), AzureStorageKeyDetector),
        (("://",), BasicAuthDetector), (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), GitHubTokenDetector), (_GITLAB, GitLabTokenDetector),
        (("eyj",), JwtTokenDetector), (("authtoken",), NpmDetector), (("t3blbkfj",), OpenAIDetector), (("pypi-",), PypiTokenDetector),
        (("sg.",), SendGridDetector), (("xox", "hooks.slack"), SlackDetector), (("sq0",), SquareOAuthDetector), (("k_live_",), StripeDetector),
    ]
    found = [(triggers, [(p, 1 if p.groups else 0) for p in plugin.denylist]) for triggers, plugin in plugins]
    # the keyword rules for config-like text (key: value, key = value) and for quoted code
    rules = [*keyword.CONFIG_DENYLIST_REGEX_TO_GROUP.items(), *keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP.items()]
    found.append((("key", "pass", "pwd", "secret", "contras"), rules))
    return found


# The first look: every rule of the redactor needs one of these literals in the line (lower-cased). str.find
# is C speed, where one case-insensitive regex alternation costs a microsecond a character.
TRIGGERS = (
    "pass", "pwd", "secret", "token", "credential", "cookie", "session", "sig", "dsn", "key", "auth", "bearer",
    "private", "://", "eyj", "aws", "akia", "asia", "agpa", "aida", "aroa", "a3t", "abia", "acca", "ghp_", "gho_", "ghu_",
    "ghs_", "ghr_", "github_pat", "glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941", "glcbt-", "glimt-", "glptt-",
    "glagent-", "gloas-", "xox", "sk-", "sk_", "rk_", "hf_", "npm_", "dapi", "aiza",
    "pypi-", "sg.", "sq0", "contras", "t3blbkfj", "k_live_",
)
_GITLAB = ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941", "glcbt-", "glimt-", "glptt-", "glagent-", "gloas-")


__all__ = ["BARE_LOOK", "OWN", "TRIGGERS", "detectors"]
