"""The names of secrets and the keys that are secrets: the key rules of the one redactor (``auditor.lineage.redact``).

Three questions about a key, each pure and cached:

- does it *name* a secret (``password``, ``PGPASSWORD``, ``DB_PASS``, ``apiKey``, ``hmac_key``…; whole
  words, so ``max_tokens``, ``tokenizer``, ``num_passes``, ``sort_key`` keep their values): ``is_secret_key``;
- does it name a *collection* of secrets keyed by the secrets themselves (``hmac_keys: {<secret>: v1}``,
  ``api_keys``, ``secrets``, ``passwords``): ``names_secret_collection``; there, a key that is not a plain
  name (``v1``, ``primary``, ``2024-01``) is redacted;
- is it itself an opaque random token (a key a script made with ``secrets.token_urlsafe``): ``is_opaque_token``.
  Hex strings never are (digests, commits, run ids and snapshot ids are hex), nor identifiers
  (``ResNet50_Weights``), nor paths, URLs or dotted names; credential *shapes* and base64 of text are the
  text rules' business. Random bytes in base64 are a token whatever made them.
"""

from __future__ import annotations

import functools
import re

from auditor.lineage.redact_encoded import decode_base64

_SECRET_WORDS = frozenset({
    "password", "passwd", "passphrase", "pwd", "pass", "secret", "token", "credential", "credentials", "cookie",
    "dsn", "auth", "authorization", "apikey", "signature", "sessionid", "privatekey", "accesskey", "secretkey",
    "sig", "passcode",
})
_KEY_QUALIFIERS = frozenset({"api", "access", "private", "secret", "signing", "encryption", "decryption", "master", "ssh",
                             "account", "session", "client", "service", "hmac", "jwt", "fernet", "webhook"})
# glued spellings (PGPASSWORD, DBPASS, MYSQL_PWD, HFTOKEN): a word that contains or ends with one of these
_SECRET_INFIXES = ("password", "passwd", "passphrase", "secret", "credential")
_SECRET_SUFFIXES = ("pwd", "token", "apikey", "secretkey", "privatekey", "accesskey")
# *PASS* (DB_PASS, PGPASSFILE, PASSWD), unless the word is one of the ordinary ones holding "pass"
_PASS_ORDINARY = ("passes", "passed", "passing", "passthrough", "passthru", "passage", "passive", "passenger", "passport",
                  "bypass", "compass", "surpass", "overpass", "underpass", "multipass", "onepass", "twopass", "firstpass",
                  "secondpass", "singlepass", "fullpass", "backpass")
WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def _words(key: str) -> list[str]:
    return [w.lower() for w in WORD_SPLIT.split(key) if w]


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    """Whether a config key, variable or argument name names a secret (``db.password``, ``PGPASSWORD``, ``DB_PASS``, ``apiKey``)."""
    words = _words(key)
    if words == ["key"]:
        return True
    for i, word in enumerate(words):
        if word in _SECRET_WORDS:
            return True
        if any(infix in word for infix in _SECRET_INFIXES) or word.endswith(_SECRET_SUFFIXES):
            return True
        if "pass" in word and not any(ordinary in word for ordinary in _PASS_ORDINARY):
            return True
        if word in ("key", "keys") and i > 0 and words[i - 1] in _KEY_QUALIFIERS:
            return True
        if word == "id" and i > 0 and words[i - 1] == "session":
            return True
    return False


# the plural names of secrets whose mapping may be keyed by the secrets (tokens are left out: a tokenizer's
# ``added_tokens`` and ``special_tokens`` are keyed by token strings, which a rebuild needs)
_COLLECTIONS = frozenset({"keys", "secrets", "passwords", "passphrases", "passwds", "apikeys", "secretkeys", "privatekeys"})
# a plain name of an entry: words of letters that may end in a few digits, or numbers (v1, primary, key_2, 2024-01-15)
_NAME = re.compile(r"(?:[A-Za-z]*[0-9]{0,4}|[0-9]+)(?:[-_.](?:[A-Za-z]*[0-9]{0,4}|[0-9]+))*")


@functools.lru_cache(maxsize=4096)
def names_secret_collection(key: str) -> bool:
    """Whether the mapping under ``key`` may be keyed by secrets: ``hmac_keys``, ``api_keys``, ``secrets``, ``passwords``."""
    words = _words(key)
    return bool(words) and words[-1] in _COLLECTIONS and (words[-1] != "keys" or is_secret_key(key))


def is_plain_name(key: str) -> bool:
    """A short name an entry of a secret collection may have (``v1``, ``primary``, ``2024-01``): kept, unlike a secret."""
    return len(key) <= 20 and bool(_NAME.fullmatch(key))


_TOKEN = re.compile(r"[A-Za-z0-9_+-]{16,1024}={0,2}")
_SEPARATORS = re.compile(r"[-_+=]+")
_HEX = re.compile(r"[0-9a-f]*|[0-9A-F]*")
_CAMEL_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")


def _short_runs(text: str) -> bool:
    """Letters and digits in short runs: a random string averages under 2 characters a CamelCase word, identifiers 3 and more."""
    return len(text) < 2.6 * max(len(_CAMEL_WORDS.findall(text)), 1)


@functools.lru_cache(maxsize=8192)
def is_opaque_token(key: str) -> bool:
    """Whether a mapping key is a random token: 16+ characters of base64 or base62 mixing upper and lower case and digits
    in short runs, the whole key and its longest part between separators (``F1_macro_Class10_k5`` is words, short ones).

    Hex is never one (digests, commits, run and snapshot ids are hex), nor base64 of text (the text is scanned
    instead), nor an identifier (``ResNet50_Weights``); a short random key is sometimes missed.
    """
    if not _TOKEN.fullmatch(key):
        return False
    bare = _SEPARATORS.sub("", key)
    if _HEX.fullmatch(bare) or bare.islower() or bare.isupper() or not any(c.isdigit() for c in bare) or not _short_runs(bare):
        return False
    longest = max(_SEPARATORS.split(key), key=len)
    return len(longest) >= 10 and _short_runs(longest) and decode_base64(key) is None


# -- a YAML block in text (a config printed by OmegaConf.to_yaml or yaml.dump): its lines are the mapping's entries
_YAML_HEADER = re.compile(r"^(?P<indent> *)(?:- +)?(?P<q>[\"']?)(?P<key>[A-Za-z_][\w.-]*)(?P=q) *:[ \t]*(?:#.*)?$", re.MULTILINE)
_YAML_ENTRY = re.compile(r"(?:- +)?(?:(?P<q>[\"']?)(?P<key>[^\s\"':#][^\"':#]*?)(?P=q) *:(?: +|$))?(?P<value>.*?)(?: +#.*)?$")
_NOT_VALUES = frozenset({"", "|", ">", "|-", ">-", "|+", ">+", "{}", "[]", "~", "null", "true", "false"})


def _after_block(header: re.Match[str], indent: int, body: str) -> bool:
    """A line no deeper than the block's key ends it; a list may stand at its key's depth (``key:\n- item``)."""
    depth = len(header.group("indent"))
    return indent < depth or (indent == depth and not (body[:2] == "- " and header.group(0).lstrip()[:2] != "- "))


def yaml_block_spans(text: str, marked: str) -> list[tuple[int, int]]:
    """Spans to redact in the YAML blocks of ``text`` under a key naming a secret (every value below it) or a
    collection of secrets (its entries' keys that are not plain names). ``marked``: the prefix of a marker, kept."""
    spans: list[tuple[int, int]] = []
    for header in _YAML_HEADER.finditer(text):
        key = header.group("key")
        secret, collection = is_secret_key(key), names_secret_collection(key)
        if not (secret or collection):
            continue
        child = None
        at = header.end() + 1
        while at < len(text):
            end = text.find("\n", at)
            end = len(text) if end == -1 else end
            line = text[at:end]
            body = line.lstrip(" ")
            indent = len(line) - len(body)
            if body.strip() and _after_block(header, indent, body):
                break
            entry = _YAML_ENTRY.match(body.rstrip())
            if body.strip() and entry:
                child = indent if child is None else child
                base = at + indent
                name, value = entry.group("key"), entry.group("value")
                if collection and indent == child and name and not is_plain_name(name) and marked not in name:
                    spans.append((base + entry.start("key"), base + entry.end("key")))
                if secret and value.strip() not in _NOT_VALUES and marked not in value:
                    spans.append((base + entry.start("value"), base + entry.end("value")))
            at = end + 1
    return spans


__all__ = ["WORD_SPLIT", "is_opaque_token", "is_plain_name", "is_secret_key", "names_secret_collection", "yaml_block_spans"]
