"""What every liveplex /metrics page must be: one `liveplex_` namespace, no label a scraper owns."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

TARGET_LABELS = frozenset({"pod", "namespace", "container", "instance", "job", "service", "endpoint"})
"""What a PodMonitor/ServiceMonitor scrape attaches: a series' own label of that name is renamed
`exported_<name>` (honorLabels false) or overwrites the target's (honorLabels true)."""
RUNTIME_PREFIXES = ("python_", "process_")
"""prometheus_client's own collectors: the process, not liveplex."""


def misnamed(text: str) -> list[str]:
    """Families outside the `liveplex_` namespace and labels a scrape would overwrite, one line each."""
    wrong = []
    for family in text_string_to_metric_families(text):
        if not family.name.startswith(("liveplex_", *RUNTIME_PREFIXES)):
            wrong.append(f"family {family.name}")
        wrong += [f"{sample.name}{{{label}}}" for sample in family.samples for label in sample.labels
                  if label in TARGET_LABELS]
    return sorted(set(wrong))
