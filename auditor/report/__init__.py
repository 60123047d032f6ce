"""Reports and evidence: JSON evidence, HTML rendered from it, the index, the ledger, publishing.

Import the submodules directly (``auditor.report.publish``, ``auditor.report.ledger``);
this package imports nothing heavy on its own.
"""
