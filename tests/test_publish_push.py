"""scripts/publish.py --push and --dry-run against a recording stand-in for the Hugging Face Hub API (no network):
the token and namespace are checked before anything is staged, modules are pushed in dependency order with their
dependencies pinned at the commit just pushed, a failure stops the push with a summary and the command that pushes
the rest, a dry run writes nothing, --private reaches create_repo, files removed here are deleted upstream, and
--out never replaces a folder publish.py did not write."""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import re
import shlex

import huggingface_hub
import pytest
import requests
from helpers import publish
from huggingface_hub import CommitOperationAdd, CommitOperationDelete
from huggingface_hub.hf_api import CommitInfo, ModelInfo
from huggingface_hub.utils import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

TOKEN = "hf_test_token"
ALL = publish.module_names()


def http_error(status: int, cls=HfHubHTTPError, message: str = "refused by the stand-in hub"):
    """The exception huggingface_hub raises for an HTTP error response."""
    response = requests.Response()
    response.status_code = status
    response._content = ('{"error": "%s"}' % message).encode()
    response.headers["Content-Type"] = "application/json"
    return cls(f"{status} Client Error: {message}", response=response)


def like_hf_api(method):
    """A FakeHub method that first checks its arguments bind to the real HfApi method's signature, so publish.py
    calls the stand-in exactly as it would call huggingface_hub."""
    real = inspect.signature(getattr(huggingface_hub.HfApi, method.__name__))

    @functools.wraps(method)
    def checked(self, *args, **kwargs):
        real.bind(self, *args, **kwargs)
        return method(self, *args, **kwargs)

    return checked


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    """Stands in for huggingface_hub.HfApi: repositories in memory (branches pointing at commits, each commit a
    snapshot of files), every call recorded, HTTP errors injected with ``fail[(method, repo_id)] = status``. It
    answers with huggingface_hub's own types (ModelInfo, CommitInfo, its HTTP errors)."""

    WRITES = ("create_repo", "create_branch", "create_commit")

    def __init__(self, user="bob", orgs=(), role="write"):
        self.user, self.orgs, self.role = user, list(orgs), role
        self.repos = {}  # repo_id -> {"private": bool, "branches": {name: sha}, "commits": {sha: {path: bytes}}}
        self.calls = []  # (method, repo_id or None, details)
        self.fail = {}

    # ~~~ helpers of the tests ~~~
    def add_repo(self, repo_id, files, private=False):
        self.repos[repo_id] = {"private": private, "branches": {}, "commits": {}}
        self._commit(repo_id, "main", {".gitattributes": b"*.bin filter=lfs\n", **files})

    def files(self, repo_id, branch="main"):
        repo = self.repos[repo_id]
        return repo["commits"][repo["branches"][branch]]

    def head(self, repo_id, branch="main"):
        return self.repos[repo_id]["branches"][branch]

    def writes(self, repo_id=None):
        return [c for c in self.calls if c[0] in self.WRITES and (repo_id is None or c[1] == repo_id)]

    def _commit(self, repo_id, branch, files):
        repo = self.repos[repo_id]
        sha = hashlib.sha1(
            f"{repo_id}:{branch}:{len(repo['commits'])}".encode()
            + b"".join(k.encode() + v for k, v in sorted(files.items()))
        ).hexdigest()
        repo["commits"][sha] = dict(files)
        repo["branches"][branch] = sha
        return sha

    def _call(self, method, repo_id, token, **details):
        self.calls.append((method, repo_id, details))
        if token != TOKEN:
            raise http_error(401, message="Invalid credentials in Authorization header")
        if (method, repo_id) in self.fail:
            raise http_error(self.fail[(method, repo_id)], message="You don't have the rights to write here")

    # ~~~ the HfApi methods publish.py uses ~~~
    @like_hf_api
    def whoami(self, token=None):
        self.calls.append(("whoami", None, {}))
        if token != TOKEN:
            raise requests.HTTPError("Invalid user token.", response=http_error(401).response)
        return {
            "type": "user",
            "name": self.user,
            "orgs": self.orgs,
            "auth": {"type": "access_token", "accessToken": {"displayName": "test", "role": self.role}},
        }

    @like_hf_api
    def repo_info(self, repo_id, revision=None, files_metadata=False, token=None):
        self._call("repo_info", repo_id, token, revision=revision)
        if repo_id not in self.repos:
            raise http_error(404, RepositoryNotFoundError, "Repository Not Found")
        branches = self.repos[repo_id]["branches"]
        if (revision or "main") not in branches:
            raise http_error(404, RevisionNotFoundError, "Invalid rev id")
        sha = branches[revision or "main"]
        siblings = [
            {"rfilename": path, "size": len(data), "blobId": blob_id(data) if files_metadata else None}
            for path, data in self.repos[repo_id]["commits"][sha].items()
        ]
        return ModelInfo(
            id=repo_id,
            sha=sha,
            private=self.repos[repo_id]["private"],
            downloads=0,
            likes=0,
            tags=[],
            siblings=siblings,
        )

    @like_hf_api
    def create_repo(self, repo_id, private=False, exist_ok=False, token=None, **kwargs):
        self._call("create_repo", repo_id, token, private=private)
        if repo_id in self.repos:
            if not exist_ok:
                raise http_error(409, message="You already created this model repo")
        else:
            self.add_repo(repo_id, {}, private=private)
        return f"https://huggingface.co/{repo_id}"

    @like_hf_api
    def create_branch(self, repo_id, branch, revision=None, exist_ok=False, token=None, **kwargs):
        self._call("create_branch", repo_id, token, branch=branch)
        branches = self.repos[repo_id]["branches"]
        branches.setdefault(branch, branches[revision or "main"])

    @like_hf_api
    def create_commit(self, repo_id, operations, commit_message, revision=None, token=None, **kwargs):
        operations = list(operations)
        self._call("create_commit", repo_id, token, revision=revision, operations=operations)
        files = dict(self.files(repo_id, revision or "main"))
        for op in operations:
            if isinstance(op, CommitOperationDelete):
                del files[op.path_in_repo]  # the hub refuses to delete a file it does not have
            else:
                assert isinstance(op, CommitOperationAdd) and isinstance(op.path_or_fileobj, bytes)
                files[op.path_in_repo] = op.path_or_fileobj
        sha = self._commit(repo_id, revision or "main", files)
        return CommitInfo(
            commit_url=f"https://huggingface.co/{repo_id}/commit/{sha}",
            commit_message=commit_message,
            commit_description="",
            oid=sha,
        )


def pinned(init_text: str):
    """{dependency module: revision} as a staged __init__.py declares them."""
    return dict(re.findall(r'\{"url": "\w+/(\w+)", "revision": "([^"]+)"[,}]', init_text))


@pytest.fixture
def hub(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    return FakeHub()


@pytest.fixture
def checked(monkeypatch):
    """The staged modules' check (each in its own process, tested in test_publish.py) is stood in for: these tests
    are about pushing. Records the modules checked."""
    seen = []

    def check_staged(staged_dir, namespace, modules):
        seen.extend(modules)
        return {m: "ok" for m in modules}

    monkeypatch.setattr(publish, "check_staged", check_staged)
    return seen


def run(hub, *args):
    return publish.main(["--namespace", "bob", *args], api=hub)


def test_push_order_puts_each_module_after_its_dependencies():
    order = publish.push_order(ALL)
    assert (
        sorted(order) == ALL and order[0] == "CoreFlowModule" and order[-1] in ("JarvisFlowModule", "AutoGPTFlowModule")
    )
    assert order != ALL, "not alphabetical"
    for index, module in enumerate(order):
        assert publish.direct_dependencies(module) <= set(order[:index]), module
    assert publish.push_order(["JarvisFlowModule", "CoreFlowModule"]) == ["CoreFlowModule", "JarvisFlowModule"]


def test_push_in_dependency_order_pins_each_dependency_at_its_new_commit(tmp_path, hub, checked, capsys):
    assert run(hub, "--out", str(tmp_path), "--push") == 0
    printed = capsys.readouterr().out
    committed = [c[1].split("/")[1] for c in hub.calls if c[0] == "create_commit"]
    assert committed == publish.push_order(ALL), "one commit per module, in dependency order"
    assert hub.calls[0][0] == "whoami"
    for module in ALL:
        repo_id = f"bob/{module}"
        files = hub.files(repo_id)
        staged = tmp_path / "bob" / module
        assert set(files) == set(publish.folder_files(str(staged))) | {".gitattributes"}, module
        assert ".jarvis-staged" not in files and (staged / ".jarvis-staged").exists()
        init = files["__init__.py"].decode()
        assert init == (staged / "__init__.py").read_text(), "the staging shows what the hub holds"
        expected = {d: hub.head(f"bob/{d}") for d in publish.direct_dependencies(module)}
        assert pinned(init) == expected, f"{module} pins its dependencies at their pushed commits"
        assert re.search(rf"pushed +bob/{module} at commit {hub.head(repo_id)}\n", printed), module
    jarvis_pins = pinned((tmp_path / "bob" / "JarvisFlowModule" / "__init__.py").read_text())
    assert jarvis_pins["CoderFlowModule"] == hub.head("bob/CoderFlowModule")
    from aiflows.flow_verse import loading

    for dependency, revision in jarvis_pins.items():  # aiflows 0.1.7 takes a commit hash as a remote revision
        entry = {"url": f"bob/{dependency}", "revision": revision}
        loading.validate_and_augment_dependency(entry, "JarvisFlowModule")
        assert entry["revision"] == revision and not loading.is_local_revision(revision)
    assert "FAILED" not in printed and "Traceback" not in printed

    # the same staging pushed again (the staging itself, not a new one: other work may change the sources meanwhile):
    # every repository already holds it, so nothing is committed and the pins stay
    hub.calls.clear()
    heads = {m: hub.head(f"bob/{m}") for m in ALL}
    result = publish.push(str(tmp_path / "bob"), "bob", ALL, "main", TOKEN, hub, say=lambda line: None)
    assert hub.writes() == [], "no empty commits"
    assert result.status == {m: "unchanged" for m in publish.push_order(ALL)} and result.commits == heads
    summary = publish.push_summary(result, "bob", "main", False, retry="")
    assert f"unchanged   bob/CoreFlowModule at commit {heads['CoreFlowModule']}" in summary


def test_a_403_stops_the_push_and_the_printed_command_pushes_the_rest(tmp_path, hub, checked, capsys):
    hub.fail[("create_commit", "bob/InterpreterFlowModule")] = 403
    assert run(hub, "--out", str(tmp_path), "--push") == 1
    captured = capsys.readouterr()
    order = publish.push_order(ALL)
    failed_at = order.index("InterpreterFlowModule")
    assert sorted(hub.repos) == sorted(f"bob/{m}" for m in order[: failed_at + 1]), "stopped at the failure"
    for module in order[failed_at:]:
        if module != "InterpreterFlowModule":
            assert hub.writes(f"bob/{module}") == [], f"{module} comes after the failure"
    dependents = [
        m for m in ALL if m != "InterpreterFlowModule" and "InterpreterFlowModule" in publish.dependency_closure([m])
    ]
    assert len(dependents) > 5 and not [m for m in dependents if f"bob/{m}" in hub.repos], (
        "nothing that depends on the failed module was pushed"
    )
    out = captured.out
    assert "Traceback" not in out + captured.err
    assert "FAILED      bob/InterpreterFlowModule: uploading to bob/InterpreterFlowModule: HTTP 403 Forbidden" in out
    assert "huggingface-cli login" in out and "HF_TOKEN" in out and "write access" in out
    for module in order[:failed_at]:
        assert f"pushed      bob/{module} at commit {hub.head(f'bob/{module}')}" in out
    assert "not pushed  " + ", ".join(f"bob/{m}" for m in order[failed_at + 1 :]) in out
    retry = out.split("push the rest")[1].splitlines()[1].strip()
    argv = shlex.split(retry)
    assert argv[:2] == [
        os.path.normpath(publish.sys.executable),
        os.path.relpath(os.path.join(publish.ROOT, "scripts", "publish.py")),
    ]
    assert argv[argv.index("--only") + 1] == ",".join(order[failed_at:])
    assert argv[argv.index("--out") + 1] == str(tmp_path) and "--push" in argv

    # the cause fixed, the printed command pushes exactly the rest, pinned to what the first run pushed
    del hub.fail[("create_commit", "bob/InterpreterFlowModule")]
    first = {m: hub.head(f"bob/{m}") for m in order[:failed_at]}
    hub.calls.clear()
    assert publish.main(argv[2:], api=hub) == 0
    assert [c[1].split("/")[1] for c in hub.calls if c[0] == "create_commit"] == order[failed_at:]
    assert {m: hub.head(f"bob/{m}") for m in order[:failed_at]} == first, "not pushed again"
    assert (
        pinned(hub.files("bob/RunCodeFlowModule")["__init__.py"].decode())["CoreFlowModule"] == first["CoreFlowModule"]
    )


def test_only_needs_its_dependencies_on_the_hub(tmp_path, hub, checked, capsys):
    assert (
        run(
            hub,
            "--out",
            str(tmp_path),
            "--modules",
            "InterpreterFlowModule",
            "--push",
            "--only",
            "InterpreterFlowModule",
        )
        == 2
    )
    error = capsys.readouterr().err
    assert "CoreFlowModule, not on the hub at main under bob: add CoreFlowModule to --only" in error
    assert "Nothing was pushed" in error and hub.writes() == []


def test_dry_run_lists_uploads_and_deletions_and_pushes_nothing(tmp_path, hub, checked, capsys):
    hub.add_repo(
        "bob/InterpreterFlowModule", {"old_helper.py": b"# gone from the staging\n", "README.md": b"an older README\n"}
    )
    assert run(hub, "--out", str(tmp_path), "--modules", "InterpreterFlowModule", "--dry-run") == 0
    out = capsys.readouterr().out
    assert hub.writes() == [], "read requests only"
    assert {c[0] for c in hub.calls} == {"whoami", "repo_info"}
    assert "bob/CoreFlowModule (new repository, public): would upload" in out
    assert "bob/InterpreterFlowModule (exists, public): would upload" in out
    section = out.split("bob/InterpreterFlowModule (exists")[1]
    for name in ("README.md", "__init__.py", "InterpreterAtomicFlow.py", "run.py"):
        assert f"\n    + {name}\n" in section, name
    assert "\n    - old_helper.py (deleted upstream)\n" in section and "- .gitattributes" not in out
    assert "dependencies pinned: CoreFlowModule at the commit this push makes" in section
    assert "would push  bob/CoreFlowModule" in out and "Nothing was created, uploaded or deleted" in out
    assert set(hub.files("bob/InterpreterFlowModule")) == {".gitattributes", "old_helper.py", "README.md"}
    init = (tmp_path / "bob" / "InterpreterFlowModule" / "__init__.py").read_text()
    assert pinned(init) == {"CoreFlowModule": "main"}, "the staging is written, not pinned"


def test_files_removed_here_are_deleted_upstream(tmp_path, hub, checked, capsys):
    hub.add_repo("bob/CoreFlowModule", {"old_helper.py": b"x = 1\n", "docs/old.md": b"old\n"})
    assert run(hub, "--out", str(tmp_path), "--modules", "CoreFlowModule", "--push") == 0
    staged = set(publish.folder_files(str(tmp_path / "bob" / "CoreFlowModule")))
    assert set(hub.files("bob/CoreFlowModule")) == staged | {".gitattributes"}, "the hub's own file stays"
    commit = [c for c in hub.calls if c[0] == "create_commit"][0][2]
    deleted = sorted(op.path_in_repo for op in commit["operations"] if isinstance(op, CommitOperationDelete))
    assert deleted == ["docs/old.md", "old_helper.py"]
    assert "2 deleted upstream" in capsys.readouterr().out


def test_the_summary_names_modules_on_the_hub_left_pinned_to_previous_commits(tmp_path, hub, checked, capsys):
    hub.add_repo("bob/ChatFlowModule", {"README.md": b"pushed earlier, pinning an earlier CoreFlowModule\n"})
    assert run(hub, "--out", str(tmp_path), "--modules", "CoreFlowModule", "--push") == 0
    out = capsys.readouterr().out
    assert "On the hub but not part of this push, bob/ChatFlowModule depends on modules it changes" in out
    assert "JarvisFlowModule" not in out.split("On the hub")[1], "a module not on the hub is not named"
    assert hub.writes("bob/ChatFlowModule") == []


@pytest.mark.parametrize("private", [True, False])
def test_private_reaches_the_repositories_created(tmp_path, hub, checked, private):
    hub.add_repo("bob/CoreFlowModule", {"README.md": b"public already\n"})
    args = ["--out", str(tmp_path), "--modules", "InterpreterFlowModule", "--push"] + ["--private"] * private
    assert run(hub, *args) == 0
    created = [(c[1], c[2]["private"]) for c in hub.calls if c[0] == "create_repo"]
    assert created == [("bob/InterpreterFlowModule", private)], "an existing repository is not created again"
    assert hub.repos["bob/InterpreterFlowModule"]["private"] is private


def test_a_branch_is_created_and_pinned_dependencies_stay_on_it(tmp_path, hub, checked):
    assert run(hub, "--out", str(tmp_path), "--modules", "InterpreterFlowModule", "--revision", "v1", "--push") == 0
    assert [c[2]["branch"] for c in hub.calls if c[0] == "create_branch"] == ["v1", "v1"]
    assert {c[2]["revision"] for c in hub.calls if c[0] == "create_commit"} == {"v1"}
    init = hub.files("bob/InterpreterFlowModule", "v1")["__init__.py"].decode()
    assert pinned(init) == {"CoreFlowModule": hub.head("bob/CoreFlowModule", "v1")}
    readme = hub.files("bob/InterpreterFlowModule", "v1")["README.md"].decode()
    assert '"url": "bob/InterpreterFlowModule", "revision": "v1"' in readme


def test_no_pin_keeps_the_branch_in_dependencies(tmp_path, hub, checked):
    assert run(hub, "--out", str(tmp_path), "--modules", "InterpreterFlowModule", "--push", "--no-pin") == 0
    assert pinned(hub.files("bob/InterpreterFlowModule")["__init__.py"].decode()) == {"CoreFlowModule": "main"}


def no_token(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.HfFolder, "path_token", tmp_path / "no_token")
    monkeypatch.setattr(huggingface_hub.HfFolder, "_old_path_token", tmp_path / "no_old_token")


@pytest.mark.parametrize(
    "case, message",
    [
        ("no token", "pushing needs a Hugging Face token with write access: run `huggingface-cli login`"),
        ("refused", "HTTP 401, the token was refused (invalid, expired or revoked): run `huggingface-cli login`"),
        ("read-only", "the token of bob is read-only; pushing needs one with write access"),
        (
            "other namespace",
            "--namespace alice: the token is bob's, who can push to bob, team only. Pass --namespace bob",
        ),
        ("read in org", "--namespace alice: bob has only read access to the organisation alice"),
    ],
)
def test_token_and_namespace_are_checked_before_anything_is_staged(tmp_path, monkeypatch, capsys, case, message):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub = FakeHub(orgs=[{"name": "team", "roleInOrg": "write"}])
    if case == "no token":
        no_token(monkeypatch, tmp_path)
    elif case == "refused":
        monkeypatch.setenv("HF_TOKEN", "hf_revoked")
    elif case == "read-only":
        hub.role = "read"
    elif case == "read in org":
        hub.orgs = [{"name": "alice", "roleInOrg": "read"}]

    def stage_module(*args, **kwargs):
        raise AssertionError("staged before the token and namespace were checked")

    monkeypatch.setattr(publish, "stage_module", stage_module)
    namespace = "alice" if case in ("other namespace", "read in org") else "bob"
    out = tmp_path / "out"
    for mode in ("--push", "--dry-run"):
        assert (
            publish.main(["--namespace", namespace, "--out", str(out), "--modules", "CoreFlowModule", mode], api=hub)
            == 2
        )
        error = capsys.readouterr().err
        assert message in error and "Traceback" not in error, error
        assert "HF_TOKEN" in error or "--namespace bob" in error, "says what to do"
        assert not out.exists() and hub.writes() == []
    assert [c[0] for c in hub.calls] == ([] if case == "no token" else ["whoami", "whoami"])


def test_an_organisation_of_the_user_is_a_namespace_it_may_push_to(tmp_path, hub, checked):
    hub.orgs = [{"name": "team", "roleInOrg": "contributor"}]
    assert (
        publish.main(["--namespace", "team", "--out", str(tmp_path), "--modules", "CoreFlowModule", "--push"], api=hub)
        == 0
    )
    assert "team/CoreFlowModule" in hub.repos


def test_local_and_push_together_are_refused_before_anything_is_staged(tmp_path, hub, capsys):
    out = tmp_path / "out"
    for mode in ("--push", "--dry-run"):
        assert run(hub, "--out", str(out), "--local", mode) == 2
        assert "cannot be pushed" in capsys.readouterr().err
    assert not out.exists() and hub.calls == []


# ~~~ --out never replaces a folder publish.py did not write ~~~
@pytest.mark.parametrize("kind", ["git clone", "marked git clone", "unmarked folder", "symlink"])
def test_out_refuses_a_folder_it_did_not_write(tmp_path, hub, checked, monkeypatch, capsys, kind):
    target = tmp_path / "out" / "bob" / "CoreFlowModule"
    target.parent.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mine.txt").write_text("mine\n")
    if kind == "symlink":
        os.symlink(elsewhere, target)
    else:
        target.mkdir()
        (target / "README.md").write_text("my edits\n")
        if "git" in kind:
            (target / ".git").mkdir()
            (target / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        if kind.startswith("marked"):
            (target / publish.STAGED_MARK).write_text("")
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    for extra in ([], ["--push"]):
        assert run(hub, "--out", str(tmp_path / "out"), "--modules", "CoreFlowModule", *extra) == 2
        error = capsys.readouterr().err
        assert "--out would replace folders publish.py did not write; nothing was written" in error
        assert str(target) in error and "choose another --out" in error
        assert (".git" in error) == ("git" in kind) and ("symbolic link" in error) == (kind == "symlink")
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before, "nothing touched"
    assert checked == [] and hub.calls == [], "refused before the check and before the hub is asked"


def test_out_replaces_a_previous_staging_of_its_own(tmp_path, checked):
    out = tmp_path / "out"
    assert publish.main(["--namespace", "bob", "--out", str(out), "--modules", "CoreFlowModule"]) == 0
    leftover = out / "bob" / "CoreFlowModule" / "removed_since.py"
    leftover.write_text("x = 1\n")
    assert publish.main(["--namespace", "bob", "--out", str(out), "--modules", "CoreFlowModule"]) == 0
    assert not leftover.exists() and (out / "bob" / "CoreFlowModule" / publish.STAGED_MARK).exists()


def test_a_failed_read_before_pushing_pushes_nothing(tmp_path, hub, checked, capsys):
    hub.fail[("repo_info", "bob/InterpreterFlowModule")] = 500
    assert run(hub, "--out", str(tmp_path), "--modules", "InterpreterFlowModule", "--push") == 2
    error = capsys.readouterr().err
    assert "reading bob/InterpreterFlowModule on the hub: HTTP 500" in error and "Nothing was pushed" in error
    assert hub.writes() == []
