"""The repetition guard reads a reply in one pass: what it holds and what each new piece costs do not grow with what
came before, so a 10 MB reply (a long script, a huge line in a stream) is read as fast per megabyte as a short one.
Costs are measured in memory allocated, not in seconds (benchmarks/repetition_guard.py prints MB per second)."""

from __future__ import annotations

import tracemalloc

from aiflows_jarvis.ChatFlowModule.repetition import CHECK_EVERY, RepetitionGuard, find_repetition


def _prose(chars: int, line_every: int = 0) -> str:
    words, total, i = [], 0, 0
    while total < chars:
        word = f"w{i * 7919 % 100003}"
        if line_every and i % line_every == line_every - 1:
            word += ".\n"
        words.append(word)
        total += len(word) + 1
        i += 1
    return " ".join(words)


def _peak_of_one_more_piece(guard: RepetitionGuard, piece: str) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        guard.feed(piece)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_piece_costs_no_more_after_40_kb_than_the_windows_hold():
    for text in (_prose(40_000), _prose(40_000, line_every=9), "x" * 40_000):
        guard = RepetitionGuard()
        for start in range(0, len(text), CHECK_EVERY):
            assert guard.feed(text[start : start + CHECK_EVERY]) is None
        peak = _peak_of_one_more_piece(guard, "y" * (CHECK_EVERY - 1) + "\n")
        assert peak < 64_000, f"one piece allocated {peak} bytes: the guard copies or scans what came before"


def test_a_loop_after_a_long_sound_text_is_found_at_its_first_copy():
    sound = _prose(300_000, line_every=11) + "\n"
    loop = "Compute the first primes and write them to the file.\n" * 12
    found = find_repetition(sound + loop)
    assert found is not None and found.count == 8
    assert found.keep == len(sound) + len(loop) // 12 - 1, "kept up to the end of the first copy"


def test_a_word_loop_inside_a_huge_line_is_found_and_a_huge_line_alone_is_not_a_loop():
    line = "x" * 2_000_000
    assert find_repetition(line) is None
    assert find_repetition(_prose(1_000_000)) is None
    found = find_repetition(line + " " + "and then it goes on " * 30)
    assert found is not None and found.unit == "and then it goes on" and found.count >= 8


def test_a_streamed_reply_in_odd_pieces_gives_what_the_whole_text_gives():
    text = _prose(5_000, line_every=7) + "\n" + "Step 3. Save the chart to out.png now.\n" * 9
    guard, found = RepetitionGuard(), None
    for start in range(0, len(text), 37):  # pieces that cut words, sentences and runs of ". "
        found = guard.feed(text[start : start + 37])
        if found is not None:
            break
    whole = find_repetition(text)
    assert found is not None and whole is not None
    assert (
        (found.unit, found.keep)
        == (whole.unit, whole.keep)
        == ("save the chart to out.png now.", len(text) - 8 * len("Step 3. Save the chart to out.png now.\n") - 1)
    )


def test_sentences_end_only_at_a_space_after_their_full_stop():
    # "3.14" and "e.g.x" end no sentence; a full stop at the end of a piece waits for what follows it
    text = "The value is 3.14 and e.g.x stays one word here. " * 9
    guard, found = RepetitionGuard(), None
    for start in range(0, len(text), 50):  # each piece ends on the full stop, before its space
        found = found or guard.feed(text[start : start + 50])
    assert found is not None and found.unit == "the value is 3.14 and e.g.x stays one word here."
    assert found.keep == len("The value is 3.14 and e.g.x stays one word here.")
