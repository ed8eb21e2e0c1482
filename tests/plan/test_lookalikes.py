"""Look-alike letters from one table: the screen's mark and alarm, the host alarm and the policy's
names agree on what passes for Latin, and the table is Unicode's, read only when needed."""

from __future__ import annotations

import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewer.plan.hosts import read_host
from reviewer.plan.lookalikes import lookalike_identifier, read_confusables, skeleton
from reviewer.plan.proposal import Call
from reviewer.policy.file import parse_policy
from reviewer.policy.verdict import resolve_environment
from reviewer.reading.analysis import call_lookalike
from tools.confusables_table import table_text

PASSES_FOR = {
    # Cyrillic small letters, from the everyday ones to those a hand-made list forgets (г, ѵ, ш, ӏ)
    **dict(zip("аеорсухіјѕԁԛԝһӏгѵшү", "aeopcyxijsdqwhlrvwy", strict=True)),
    # Cyrillic capitals, including those whose small letter reads otherwise (В, К, М, Н, Т)
    **dict(zip("АВЕКМНОРСТХЅІЈҮԚԜҺѴ", "ABEKMHOPCTXSIJYQWHV", strict=True)),
    # Greek, small and capital (Ν is N, ν is v; Β is B, β is not)
    **dict(zip("οανριυκτχ", "oavpiuktx", strict=True)),
    **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "ABEZHIKMNOPTYX", strict=True)),
    # Armenian
    **dict(zip("օսհոցզ", "ouhngq", strict=True)),
}
"""Letters of other scripts and the Latin letter each is read as (Unicode's confusables.txt)."""

NOT_LOOKALIKES = [
    "delete",
    "ticket",
    "café",
    "éé",
    "naïve",
    "削除",
    "チケット",
    "티켓",
    "удалить",
    "дд",
    "λλ",
]
"""Names no part may flag: ASCII, accented Latin, CJK, and Cyrillic or Greek that reads as itself."""


def _ids(letter: str) -> str:
    return unicodedata.name(letter)


def _policy_reads(written: str, meant: str) -> bool:
    """Whether the policy gives a plan naming `written` the environment named `meant`, and says it
    passes for it."""
    policy = parse_policy(f'[environments."{meant}"]\napprovals = 2\n')
    environment, alarms = resolve_environment(policy, None, written)
    return environment.name == meant and [name for name, _ in alarms] == ["environment_lookalike"]


def _host_alarmed(label: str) -> bool:
    return any("passes for Latin" in alarm for alarm in read_host(f"https://{label}.example/v1").alarms)


@pytest.mark.parametrize(("lookalike", "latin"), PASSES_FOR.items(), ids=map(_ids, PASSES_FOR))
def test_the_screen_the_host_alarm_and_the_policy_agree_on_a_look_alike(lookalike: str, latin: str) -> None:
    """A name written only in one look-alike letter (`аа`): the review screen marks the call, the host
    alarm fires on it as a label, and the policy reads it as the Latin name (`aa`)."""
    written, meant = lookalike * 2, (latin * 2).lower()
    assert lookalike_identifier(written)
    assert call_lookalike(Call(seq=1, tool=written, effect="create"))
    assert _host_alarmed(written)
    assert skeleton(written) == skeleton(latin * 2)
    assert _policy_reads(written, meant)


@pytest.mark.parametrize("written", ["ａｐｉ", "ＡＰＩ", "ａpi"])
def test_fullwidth_latin_is_flagged_everywhere_and_read_as_latin(written: str) -> None:
    assert lookalike_identifier(written) and call_lookalike(Call(seq=1, tool=written, effect="create"))
    assert not read_host(f"https://{written}.example/v1").plain
    assert _policy_reads(written, "api")


@pytest.mark.parametrize("written", NOT_LOOKALIKES)
def test_plain_names_are_flagged_nowhere(written: str) -> None:
    assert not lookalike_identifier(written)
    assert not call_lookalike(Call(seq=1, tool=written, effect="create"))
    assert not _host_alarmed(written)
    assert skeleton(written) == written if written.isascii() else not skeleton(written).isascii()


@pytest.mark.parametrize(
    "name",
    [
        "d\u0435lete_ticket",
        "\u0441r\u0435\u0430t\u0435",
        "ｄelete_ticket",
        "𝐝elete",
        "caf\u0065\u0301",
        "/v1/tick\u0435ts/t3",
        "rеfund_amount",
    ],
    ids=["cyrillic e", "all cyrillic", "fullwidth", "math bold", "not NFC", "path", "arg key"],
)
def test_lookalike_identifiers_are_flagged(name: str) -> None:
    assert lookalike_identifier(name)


@pytest.mark.parametrize(
    "name",
    ["delete_ticket", "удалить_заявку", "café", "チケット削除", "티켓_삭제", "/v1/tickets/t3", "amount_€"],
)
def test_plain_identifiers_in_one_script_are_not(name: str) -> None:
    assert not lookalike_identifier(name)


@pytest.mark.parametrize(
    "written",
    [
        "production",
        "prоduction",  # Cyrillic о
        "рrоduсtion",  # Cyrillic р, о, с
        "РRОDUСТІОN",  # Cyrillic Р, О, С, Т, І
        "produ\u200bction",  # a zero-width space
        "pro\u2060duction",  # a word joiner
        "PRODUCTION",
        "ｐｒｏｄｕｃｔｉｏｎ",  # fullwidth
        " Production ",
        "production\ufe0f",  # a variation selector
    ],
)
def test_look_alikes_of_production_share_its_skeleton(written: str) -> None:
    assert skeleton(written) == skeleton("production") == "production"


@pytest.mark.parametrize("other", ["prod", "staging", "productions", "pr0duction", "próduction"])
def test_other_names_keep_their_own(other: str) -> None:
    assert skeleton(other) != skeleton("production")


@given(st.text(max_size=30))
def test_the_skeleton_is_a_fixed_point(text: str) -> None:
    """UTS #39: the skeleton of a skeleton is itself, so comparing skeletons is an equivalence."""
    assert skeleton(skeleton(text)) == skeleton(text)


EXCERPT = """\
# confusables.txt
# Version: 17.0.0
0442 ;\t1D1B ;\tMA\t# ( т → ᴛ ) CYRILLIC SMALL LETTER TE → LATIN LETTER SMALL CAPITAL T\t#
0422 ;\t0054 ;\tMA\t# ( Т → T ) CYRILLIC CAPITAL LETTER TE → LATIN CAPITAL LETTER T\t#
03BD ;\t0076 ;\tMA\t# ( ν → v ) GREEK SMALL LETTER NU → LATIN SMALL LETTER V\t#
039D ;\t004E ;\tMA\t# ( Ν → N ) GREEK CAPITAL LETTER NU → LATIN CAPITAL LETTER N\t#
0430 ;\t0061 ;\tMA\t# ( а → a ) CYRILLIC SMALL LETTER A → LATIN SMALL LETTER A\t#
0410 ;\t0041 ;\tMA\t# ( А → A ) CYRILLIC CAPITAL LETTER A → LATIN CAPITAL LETTER A\t#
FF41 ;\t0061 ;\tMA\t# ( ａ → a ) FULLWIDTH LATIN SMALL LETTER A → LATIN SMALL LETTER A\t#
0030 ;\t004F ;\tMA\t# ( 0 → O ) DIGIT ZERO → LATIN CAPITAL LETTER O\t#
006D ;\t0072 006E ;\tMA\t# ( m → rn ) LATIN SMALL LETTER M → LATIN SMALL LETTER R, LATIN SMALL LETTER N\t#
0022 ;\t0027 0027 ;\tMA\t#* ( " → '' ) QUOTATION MARK → APOSTROPHE, APOSTROPHE\t#
"""


def test_the_table_is_written_from_unicodes_file_for_what_a_folded_name_can_hold() -> None:
    """Small letters and caseless characters keep their prototype, a small letter whose own one is
    not Latin takes its capital's (т), a capital is kept only where its small letter reads otherwise
    (Ν), and what NFKC or case folding removes (ａ, А) or digits (0) are left out."""
    version, tables = read_confusables(table_text(EXCERPT))
    assert version == "17.0.0"
    assert tables == {
        "MA": {'"': "''", "m": "rn", "а": "a", "ν": "v", "т": "T"},
        "CAPITAL": {"Ν": "N"},
    }


def test_the_committed_table_keeps_unicodes_notice_and_names_its_version() -> None:
    text = (Path(__file__).resolve().parents[2] / "reviewer" / "plan" / "confusables.txt").read_text()
    version, tables = read_confusables(text)
    assert version and "Unicode" in text.splitlines()[7] and len(tables["MA"]) > 2000


def test_starting_the_app_or_the_policy_does_not_read_the_table() -> None:
    """The table is read the first time a name is, not at start-up."""
    code = (
        "import reviewer.__main__, reviewer.tui.app, reviewer.policy.file;"
        "from reviewer.plan import lookalikes;"
        "assert lookalikes._tables.cache_info().currsize == 0;"
        "lookalikes.skeleton('ascii');"
        "assert lookalikes._tables.cache_info().currsize == 1"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
