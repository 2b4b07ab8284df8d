"""The fault suite: Jarvis tried as a hostile user and a careless one would.

    python -m benchmarks.faults            every case (the slow part too: kill trials, disk full, concurrency,
                                            signals at each stage, big files, kernel limits), under 10 minutes
    python -m benchmarks.faults --fast     the fast part (what CI runs, tests/test_faults_fast.py)
    python -m benchmarks.faults --json     the same, as JSON for machines
    python -m benchmarks.faults --list     the cases, with what "handled" and "data lost" mean for each
    python -m benchmarks.faults -k NAME    only the cases whose id contains NAME

Each case goes through the real command line (``run_jarvis.py`` in a child process, its LLM the loopback
OpenAI-compatible server of ``tests/loopback_llm.py`` or a ``--replay`` transcript, its user scripted stdin or
``--yes``) or through the module a user would call (``SaveCodeAtomicFlow``, the memory functions, ``CodeInterpreter``).
It says what "handled" means (the exit code and message expected, no traceback, no raw escape sequence on the
terminal, no process left behind) and what "data lost" means (an approved plan, a saved function, a log entry,
``jarvis_run.json`` or a user file missing or corrupted afterwards). Each case runs in a forked process of its own,
in a session of its own and a temporary folder of its own, which are removed afterwards (processes included): a case
that crashes or hangs is counted as not handled and the suite goes on.

The output is one line per class: ``class  tried  handled  data-lost  pending``, then a total, then the cases not
handled with the first reason. Data lost must be 0. ``PENDING`` below lists the cases known to wait for a fix that
is assigned but not in yet (the CI test does not require them to be handled; they are marked "pending"): empty it as
the fixes land. The exit code is 0 when nothing was lost and every case not pending was handled.
"""

#: Cases that fail today because the fix is assigned and not in yet (case id -> what is missing). The CI test
#: (tests/test_faults_fast.py) does not require them to be handled; the output marks them "pending". Remove an entry
#: once its case is handled (the output lists "pending but handled" cases).
PENDING: dict = {}
