"""syntax/tokens.py: a program's size in tokens, and the measures a candidate's order reads."""

from __future__ import annotations

from shrinkgpu.syntax.tokens import count_tokens, measure


def test_names_operators_numbers_and_strings_count_and_formatting_is_free():
    assert count_tokens("x = f(1, 'a')\n") == 8  # x = f ( 1 , 'a' )
    spaced = "# a comment\n\nx  =  f( 1,\n      'a' )   # and another\n"
    assert count_tokens(spaced) == count_tokens("x = f(1, 'a')\n")


def test_a_text_that_does_not_tokenize_is_counted_by_words_and_symbols_without_comments():
    assert count_tokens("x = (1,  # open\n") == 5  # x = ( 1 ,


def test_measure_counts_tokens_blocks_loops_and_the_integers_written():
    source = "for i in range(3):\n    if i:\n        x = [j for j in y]\nwhile n < 2000000:\n    n += 1\n"
    tokens, blocks, loops, magnitude = measure(source)
    assert tokens == count_tokens(source)
    assert (blocks, loops) == (3, 2)  # the comprehension's ``for`` starts no loop statement
    assert magnitude == 3 + 1_000_000 + 1  # each integer capped at a million
    assert measure("x = (\n") == (count_tokens("x = (\n"), 0, 0, 0)
