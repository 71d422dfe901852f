"""The emulator's API contract tests, run unchanged against a real cluster (opt-in, as test_cluster.py).

Each test creates its own namespace (and the CRD tests a `gadgets.contract.liveplex.io` CRD they
delete again) and asserts only what a real kube-apiserver answers, so a difference between the
emulator and the cluster fails here.
"""

from __future__ import annotations

import pytest

from tests.emulator.contract import REAL_CLUSTER
from tests.emulator.test_admission import *  # noqa: F403
from tests.emulator.test_auth import *  # noqa: F403
from tests.emulator.test_crd_admission import *  # noqa: F403
from tests.emulator.test_readiness_gates import *  # noqa: F403

pytestmark = pytest.mark.skipif(not REAL_CLUSTER, reason="a real cluster: set KUBECONFIG and LIVEPLEX_E2E_CLUSTER=1")
