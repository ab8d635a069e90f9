"""The Python SDK answers like the Rust SDK: HTTP failures by kind (4030 with the reason,
5006, 5000 retryable), atomic kv calls passed to the host as the contract names them, an
uncaught exception located, and the WIT copy equal to the repository's."""

from __future__ import annotations

import filecmp
import sys
import types
import unittest
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wharf_sdk import ToolError, http, kv  # noqa: E402
from wharf_sdk import _wit  # noqa: E402

PACKAGE = Path(__file__).resolve().parents[1] / "wharf_sdk"


class HttpFailureTests(unittest.TestCase):
    def test_a_denial_is_4030_with_the_hosts_reason(self) -> None:
        egress = types.SimpleNamespace(check=lambda url: "checked")

        def refuse(fn, *args):
            raise ToolError(4030, f"outbound HTTP to `{args[0]}` is not granted: add it")

        with mock.patch.object(_wit, "module", return_value=egress), mock.patch.object(_wit, "host_call", refuse):
            err = http.failure("http://x.test/a", "HttpRequestDenied")
        self.assertEqual(err.code, 4030)
        self.assertFalse(err.retryable)
        self.assertIn("is not granted", err.message)
        self.assertEqual(err.kind, "HttpRequestDenied")

    def test_a_denial_natively_still_names_the_grant(self) -> None:
        err = http.failure("http://10.0.0.1/", "DestinationIpProhibited")
        self.assertEqual(err.code, 4030)
        self.assertIn("grants.http_private_cidrs", err.message)

    def test_timeouts_and_other_failures(self) -> None:
        for kind in ("ConnectionTimeout", "HttpResponseTimeout"):
            err = http.failure("http://x.test/", kind)
            self.assertEqual((err.code, err.retryable), (5006, True), kind)
        err = http.failure("http://x.test/", "ConnectionRefused")
        self.assertEqual((err.code, err.retryable), (5000, True))
        self.assertIn("ConnectionRefused", err.message)


class KvTests(unittest.TestCase):
    def test_increment_and_compare_and_swap_reach_the_host(self) -> None:
        seen = []
        fake = types.SimpleNamespace(
            Scope=types.SimpleNamespace(BACKEND="b", SESSION="s"),
            increment=lambda scope, key, delta: seen.append(("inc", scope, key, delta)) or 7,
            compare_and_swap=lambda scope, key, expected, new: seen.append(("cas", scope, key, expected, new))
            or True,
        )
        with mock.patch.object(_wit, "module", return_value=fake), mock.patch.object(
            _wit, "host_call", lambda fn, *args: fn(*args)
        ):
            self.assertEqual(kv.increment("hits", 2), 7)
            self.assertEqual(kv.session.increment("hits"), 7)
            self.assertTrue(kv.compare_and_swap("owner", None, "me"))
            self.assertTrue(kv.backend.compare_and_swap("owner", b"me", None))
        self.assertEqual(
            seen,
            [
                ("inc", "b", "hits", 2),
                ("inc", "s", "hits", 1),
                ("cas", "b", "owner", None, b"me"),
                ("cas", "b", "owner", b"me", None),
            ],
        )

    def test_a_bad_scope_is_refused(self) -> None:
        fake = types.SimpleNamespace(increment=None, Scope=None)
        with mock.patch.object(_wit, "module", return_value=fake):
            with self.assertRaises(ValueError):
                kv.increment("k", scope="tenant")


class UncaughtTests(unittest.TestCase):
    def test_an_uncaught_exception_says_where(self) -> None:
        def broken() -> None:
            raise KeyError("missing")

        try:
            broken()
        except KeyError as exc:
            err = ToolError.from_exception(exc)
        self.assertEqual(err.code, 5000)
        self.assertEqual(err.data["exception"], "KeyError")
        self.assertIn("test_parity.py", err.data["at"])
        self.assertIn("in broken", err.data["at"])


class WitTests(unittest.TestCase):
    def test_the_package_carries_a_copy_of_the_contract(self) -> None:
        wit = PACKAGE / "wit"
        self.assertFalse(wit.is_symlink(), "a symlink does not travel with the package")
        self.assertTrue((wit / "plugin.wit").is_file())
        repo = PACKAGE.parents[2] / "wit"
        if not (repo / "plugin.wit").is_file():
            return  # a copy of the SDK outside the repository: nothing to compare with
        compared = filecmp.dircmp(repo, wit, ignore=["wharf-plugin@0.1.0"])

        def differences(c: filecmp.dircmp) -> list:
            found = c.left_only + c.right_only + c.diff_files
            for sub in c.subdirs.values():
                found += differences(sub)
            return found

        self.assertEqual(differences(compared), [], "copy wit/ into sdk/python/wharf_sdk/wit/")


if __name__ == "__main__":
    unittest.main()
