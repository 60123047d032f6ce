"""A record's digest is the same in another interpreter (a subprocess each)."""

import json
import subprocess
import sys

from tests.fixtures.records import complete_record


def _reordered(value):
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


_DIGEST_SCRIPT = """
import json, sys
from auditor.lineage.record import RunRecord
print(RunRecord.from_dict(json.loads(sys.stdin.read())).digest())
"""


def test_the_digest_is_identical_across_processes_and_dict_insertion_orders():
    data = complete_record().to_dict()
    texts = [json.dumps(data), json.dumps(_reordered(data))]
    assert list(json.loads(texts[0])) != list(json.loads(texts[1]))  # really built in another order
    digests = {
        subprocess.run([sys.executable, "-c", _DIGEST_SCRIPT], input=text, capture_output=True, text=True, check=True).stdout.strip()
        for text in texts
    }
    assert digests == {complete_record().digest()}

