"""The own-env page's table of the default search is its committed log's, generated."""

from trainers.experiments import default_search


def test_the_search_table_on_the_page_is_generated_from_the_log():
    page = default_search.PAGE.read_text()
    assert default_search.with_table(page, default_search.table()) == page
    assert "**the default**" in default_search.table()
