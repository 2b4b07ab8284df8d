"""Pushing staged modules to the aiflows hub (Hugging Face): the token and namespace check, what the hub holds,
the push in dependency order with pinned dependencies, and its summary."""

from __future__ import annotations

import hashlib
import os
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from .source import PublishError, dependency_closure, direct_dependencies, folder_files, module_names
from .staging import staged_digests, staged_init

HUB_OWN_FILES = {".gitattributes"}  # the hub writes it into every new repository: never deleted
TOKEN_HELP = (
    "run `huggingface-cli login` (it stores a token) or set HF_TOKEN to a token with write access "
    "(https://huggingface.co/settings/tokens)"
)


def push_order(modules: Iterable[str]) -> List[str]:
    """``modules`` ordered so that each comes after every module of the list it depends on (its `dependencies`, as
    its staged __init__.py declares them); alphabetical where the order is free."""
    todo = {m: direct_dependencies(m) for m in modules}
    order: List[str] = []
    while todo:
        ready = sorted(m for m, deps in todo.items() if not deps & set(todo))
        if not ready:
            raise PublishError(f"these modules depend on each other in a cycle: {', '.join(sorted(todo))}")
        order.append(ready[0])
        del todo[ready[0]]
    return order


def find_token() -> str:
    """The Hugging Face token: HF_TOKEN, else the one `huggingface-cli login` stored."""
    from huggingface_hub import HfFolder

    token = HfFolder.get_token()
    if not token:
        raise PublishError(f"pushing needs a Hugging Face token with write access: {TOKEN_HELP}")
    return token


def describe_hub_error(error: BaseException, doing: str) -> str:
    """One paragraph saying what a failed hub request means and what to do (never a traceback). ``doing``: what was
    asked, e.g. "uploading to bob/CoreFlowModule"."""
    status = getattr(getattr(error, "response", None), "status_code", None)
    first_line = (str(error).strip().splitlines() or [""])[0]
    if isinstance(error, KeyboardInterrupt):
        return f"{doing}: interrupted (Ctrl+C); it may or may not have reached the hub"
    if status == 401:
        return f"{doing}: HTTP 401, the token was refused (invalid, expired or revoked): {TOKEN_HELP}"
    if status == 403:
        return (
            f"{doing}: HTTP 403 Forbidden, the token may not write there. Pushing needs a token with write access "
            f"to the namespace (a read token, or a fine-grained one without write permission on it, cannot "
            f"push): {TOKEN_HELP}"
        )
    if status is not None:
        return f"{doing}: HTTP {status}: {getattr(error, 'server_message', None) or first_line}"
    import requests

    if isinstance(error, (requests.ConnectionError, requests.Timeout)):
        return (
            f"{doing}: the Hugging Face Hub could not be reached ({first_line}); check the network (and "
            "HF_ENDPOINT if set), then retry"
        )
    return f"{doing}: {type(error).__name__}" + (f": {first_line}" if first_line else "")


def check_hub_access(api, token: str, namespace: str) -> str:
    """Check that ``token`` is valid and may create repositories in ``namespace`` (its user, or one of the user's
    organisations where the user has more than read access); returns the user's name. Raises PublishError."""
    try:
        me = api.whoami(token=token)
    except Exception as error:  # noqa: BLE001 - any failure becomes a message
        raise PublishError(describe_hub_error(error, "checking the token with the Hugging Face Hub")) from None
    user = me.get("name")
    if ((me.get("auth") or {}).get("accessToken") or {}).get("role") == "read":
        raise PublishError(f"the token of {user} is read-only; pushing needs one with write access: {TOKEN_HELP}")
    orgs = {org.get("name"): org.get("roleInOrg") for org in me.get("orgs") or []}
    if namespace != user and namespace not in orgs:
        yours = ", ".join([str(user)] + sorted(map(str, orgs)))
        raise PublishError(
            f"--namespace {namespace}: the token is {user}'s, who can push to {yours} only. Pass "
            f"--namespace {user} (or one of those organisations), or log in as an account that can "
            f"write to {namespace}: {TOKEN_HELP}"
        )
    if orgs.get(namespace) == "read":
        raise PublishError(
            f"--namespace {namespace}: {user} has only read access to the organisation {namespace}. "
            f"Ask one of its admins for write access, or pass --namespace {user}"
        )
    return user


class Remote:
    """A repository as it stands on the hub at the branch pushed to, read before anything is pushed."""

    def __init__(
        self,
        exists: bool = False,
        private: Optional[bool] = None,
        head: Optional[str] = None,
        files: Optional[Dict[str, object]] = None,
    ):
        self.exists, self.private = exists, private
        self.head = head  # the branch's commit; None if the repository or the branch does not exist yet
        self.files = files or {}  # path -> RepoSibling, at the branch (or at main, which a missing branch starts from)


def read_remote(api, repo_id: str, revision: str, token: str) -> Remote:
    """What the hub holds for ``repo_id`` at ``revision`` (read requests only). Raises PublishError."""
    from huggingface_hub.utils import RepositoryNotFoundError, RevisionNotFoundError

    try:
        try:
            info = api.repo_info(repo_id, revision=revision, files_metadata=True, token=token)
            head = info.sha
        except RevisionNotFoundError:  # the branch will be created from main
            info = api.repo_info(repo_id, files_metadata=True, token=token)
            head = None
    except RepositoryNotFoundError:
        return Remote()
    except Exception as error:  # noqa: BLE001 - any failure becomes a message
        raise PublishError(
            describe_hub_error(error, f"reading {repo_id} on the hub") + "\nNothing was pushed."
        ) from None
    return Remote(True, info.private, head, {sibling.rfilename: sibling for sibling in info.siblings or []})


def same_on_hub(sibling, data: bytes) -> bool:
    """Whether the hub's file (a RepoSibling read with files_metadata) holds exactly ``data``: its LFS sha256, or
    its git blob id."""
    if sibling is None:
        return False
    lfs = getattr(sibling, "lfs", None)
    if lfs:
        return hashlib.sha256(data).hexdigest() == lfs.get("sha256")
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == getattr(sibling, "blob_id", None)


class PushResult:
    """What push did."""

    def __init__(self, commits: Dict[str, str]):
        self.status: Dict[str, str] = {}  # module -> "pushed", "unchanged" or "would push", in push order
        self.commits = dict(commits)  # module -> its repository's commit at the branch
        self.failed: Optional[Tuple[str, str]] = None  # (module, what went wrong)
        self.not_pushed: List[str] = []  # the failed module and every one after it
        self.dependents_on_hub: List[str] = []  # modules on the hub, not pushed now, that depend on some pushed now


def push(
    staged_dir: str,
    namespace: str,
    modules: List[str],
    revision: str,
    token: str,
    api,
    private: bool = False,
    pin: bool = True,
    dry_run: bool = False,
    say: Callable[[str], None] = print,
) -> PushResult:
    """Push each staged module to its repository NAMESPACE/<Module> on the hub (branch ``revision``), each after the
    modules it depends on, stopping at the first failure.

    Each repository ends up holding exactly the staged folder (uploads and deletions in one commit; none when it
    already does; the hub's .gitattributes is kept). New repositories are private with ``private``. With ``pin``, a
    module's `dependencies` name each dependency at the commit its repository has just been given (or has on the hub
    now, for one not among ``modules``), and the staged __init__.py is rewritten so. With ``dry_run``, only read
    requests are made. Everything is read before anything is written: a dependency missing from the hub, or a read
    that fails, raises PublishError with nothing pushed; a failed write is returned in the result, never raised."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    order = push_order(modules)
    outside = sorted({d for m in order for d in direct_dependencies(m)} - set(order))
    remotes = {m: read_remote(api, f"{namespace}/{m}", revision, token) for m in outside + order}
    missing = [d for d in outside if remotes[d].head is None]
    if missing:
        raise PublishError(
            f"the modules to push depend on {', '.join(missing)}, not on the hub at {revision} under "
            f"{namespace}: add {','.join(missing)} to --only. Nothing was pushed."
        )
    result = PushResult({d: remotes[d].head for d in outside})
    # modules not pushed now that depend on some that are: those on the hub keep pinning the commits they were pushed
    # with, which the summary warns about
    dependents = [
        m for m in module_names() if m not in order and m not in outside and set(order) & set(dependency_closure([m]))
    ]
    result.dependents_on_hub = [m for m in dependents if read_remote(api, f"{namespace}/{m}", revision, token).head]
    for index, module in enumerate(order):
        repo_id, remote, doing = f"{namespace}/{module}", remotes[module], f"reading the staged {module}"
        try:
            folder = os.path.join(staged_dir, module)
            files = {}
            for rel in folder_files(folder):
                with open(os.path.join(folder, rel), "rb") as f:
                    files[rel] = f.read()
            deps = sorted(direct_dependencies(module))
            if pin and deps:
                pins = {d: result.commits[d] for d in deps}
                files["__init__.py"] = staged_init(
                    module, namespace, revision, False, pins, staged_digests(staged_dir, module)
                ).encode("utf-8")
                if not dry_run:  # the staging shows what the hub holds
                    with open(os.path.join(folder, "__init__.py"), "wb") as f:
                        f.write(files["__init__.py"])
            upload = [rel for rel, data in files.items() if not same_on_hub(remote.files.get(rel), data)]
            delete = sorted(rel for rel in remote.files if rel not in files and rel not in HUB_OWN_FILES)
            if remote.head and not upload and not delete:
                result.status[module], result.commits[module] = "unchanged", remote.head
                say(f"{repo_id}: unchanged, already at commit {remote.head}")
                continue
            if dry_run:
                where = (
                    "new repository, " + ("private" if private else "public")
                    if not remote.exists
                    else "exists, "
                    + ("private" if remote.private else "public")
                    + (f", branch {revision} to be created from main" if remote.head is None else "")
                )
                say(f"{repo_id} ({where}): would upload {len(upload)} of {len(files)} files, delete {len(delete)}")
                for line in [f"    + {rel}" for rel in upload] + [f"    - {rel} (deleted upstream)" for rel in delete]:
                    say(line)
                if pin and deps:
                    say(
                        "    dependencies pinned: "
                        + ", ".join(
                            f"{d} at the commit this push makes"
                            if result.status.get(d) == "would push"
                            else f"{d} at {result.commits[d]}"
                            for d in deps
                        )
                    )
                result.status[module], result.commits[module] = "would push", f"<new commit of {repo_id}>"
                continue
            if not remote.exists:
                doing = f"creating the repository {repo_id}"
                api.create_repo(repo_id, private=private, exist_ok=True, token=token)
            if remote.head is None and revision != "main":
                doing = f"creating the branch {revision} of {repo_id}"
                api.create_branch(repo_id, branch=revision, exist_ok=True, token=token)
            if upload or delete:
                doing = f"uploading to {repo_id}"
                operations = [CommitOperationDelete(path_in_repo=rel) for rel in delete] + [
                    CommitOperationAdd(path_in_repo=rel, path_or_fileobj=files[rel]) for rel in upload
                ]
                commit = api.create_commit(
                    repo_id, operations, commit_message=f"Publish {module}", revision=revision, token=token
                ).oid
            else:  # a new branch that holds exactly what main holds
                doing = f"reading the branch {revision} of {repo_id}"
                commit = api.repo_info(repo_id, revision=revision, token=token).sha
        except (Exception, KeyboardInterrupt) as error:  # noqa: BLE001 - the summary says what, the rest is kept
            result.failed, result.not_pushed = (module, describe_hub_error(error, doing)), order[index:]
            return result
        result.status[module], result.commits[module] = "pushed", commit
        say(f"{repo_id}: pushed commit {commit} ({len(upload)} files uploaded, {len(delete)} deleted upstream)")
    return result


def push_summary(result: PushResult, namespace: str, revision: str, private: bool, retry: str) -> str:
    """What was and was not pushed, each repository's commit, and the command that pushes the rest."""
    dry = "would push" in result.status.values()
    lines = [f"{'Dry run' if dry else 'Push'} summary (namespace {namespace}, branch {revision}):"]
    for module, status in result.status.items():
        commit = "" if status == "would push" else f" at commit {result.commits[module]}"
        lines.append(f"  {status:<11} {namespace}/{module}{commit}")
    if result.failed:
        module, why = result.failed
        lines.append(f"  FAILED      {namespace}/{module}: {why}")
        rest = result.not_pushed[1:]
        if rest:
            lines.append(
                f"  not pushed  {', '.join(f'{namespace}/{m}' for m in rest)} (stopped at the failure: "
                f"nothing that depends on {module} was pushed)"
            )
        lines += [
            "What was pushed stays on the hub. Once the cause is fixed, push the rest (the modules already "
            "pushed are not pushed again; they are pinned at their commit on the hub) with:",
            f"  {retry}",
        ]
    elif dry:
        lines.append(
            "Nothing was created, uploaded or deleted (a dry run makes read requests only); without "
            "--dry-run, the repositories above are pushed" + (" (new ones private)." if private else ".")
        )
    changed = {m for m, status in result.status.items() if status != "unchanged"}
    left = [m for m in result.dependents_on_hub if changed & set(dependency_closure([m]))]
    if left:
        one = len(left) == 1
        lines.append(
            f"On the hub but not part of this push, {', '.join(f'{namespace}/{m}' for m in left)} "
            f"{'depends' if one else 'depend'} on modules it changes and still {'pins its' if one else 'pin'}"
            f"{'' if one else ' their'} previous commits: a project using "
            f"{'it' if one else 'one of them'} with a module pushed now would sync two revisions of the same "
            f"module. Push {'it' if one else 'them'} too (add to --modules, or leave --modules out)."
        )
    return "\n".join(lines)
