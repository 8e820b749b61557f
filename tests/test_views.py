"""Results as widgets: tables sort and page, JSON is a tree, figures are images; text fallbacks."""

from __future__ import annotations

import base64

from cemcp_kernel.engine import Engine
from magics.display import Result, result_view
from magics.magics import host_value
from magics.views import PAGE_ROWS, TableView


def test_a_dataframe_becomes_a_sortable_paged_table(engine: Engine) -> None:
    code = (
        "import pandas as pd\n"
        "pd.DataFrame({'city': [f'c{i}' for i in range(45)], 'sales': [(i * 37) % 101 for i in range(45)]})"
    )
    value = engine.execute(code).value
    view = result_view(value)
    assert isinstance(view, TableView)
    assert view.position.value == f"rows 1–{PAGE_ROWS} of 45"
    view.sort("sales", descending=True)
    top = [row[1] for row in view.visible_rows()]
    assert top == sorted(top, reverse=True) and top[0] == max((i * 37) % 101 for i in range(45))
    view.go(2)
    assert view.position.value == "rows 41–45 of 45" and view.next.disabled
    text = view._repr_mimebundle_()["text/plain"]
    assert text.splitlines()[0].split() == ["city", "sales"] and "[45 rows × 2 columns]" in text
    frame = host_value(value)
    assert list(frame.columns) == ["city", "sales"] and len(frame) == 45


def test_large_results_are_capped_with_a_visible_notice(engine: Engine) -> None:
    value = engine.execute("[{'n': i} for i in range(250_000)]").value
    assert value.table.total == 250_000 and len(value.table.rows) == 1000
    view = result_view(value)
    assert "The first 1,000 of 250,000 rows reached the notebook" in view.grid.value


def test_nested_data_is_a_collapsible_tree(engine: Engine) -> None:
    value = engine.execute("{'a': {'b': [1, 2, {'c': None}]}, 'd': 'text'}").value
    data, _ = result_view(value)._repr_mimebundle_()
    assert data["text/html"].count("<details") == 4  # one per dict or list
    assert data["text/html"].count("<summary>") == 4
    assert data["text/plain"] == "{'a': {'b': [1, 2, {'c': None}]}, 'd': 'text'}"


def test_figures_drawn_in_the_sandbox_come_back_as_images(engine: Engine) -> None:
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('shape')\nNone"
    result = engine.execute(code)
    assert result.ok, result.error
    assert len(result.images) == 1
    assert base64.b64decode(result.images[0]).startswith(b"\x89PNG")
    value = engine.execute("fig, ax = plt.subplots()\nax.bar([1], [2])\nfig").value
    assert isinstance(result_view(value), Result)
    assert "image/png" in result_view(value)._repr_mimebundle_()[0]
    assert engine.execute("plt.get_fignums()").value.data == []  # closed after each cell
