import pytest
from django.urls import NoReverseMatch, reverse

from governance.dashboard.nav import NAV, nav_links


@pytest.mark.parametrize("item", NAV, ids=lambda item: item.label)
def test_every_navigation_entry_names_a_page_that_exists(item):
    try:
        url = reverse(item.url_name)
    except NoReverseMatch:
        pytest.fail(f"NAV entry {item.label!r} names {item.url_name!r}, which does not resolve: the page would vanish")
    assert url.startswith("/")


@pytest.mark.django_db
def test_an_admin_sees_every_navigation_entry_and_an_engineer_all_but_the_admin_finance_and_lead_pages(cast):
    admin_labels = [label for label, _, _ in nav_links(user=cast.admin, path="/")]
    alice_labels = [label for label, _, _ in nav_links(user=cast.alice, path="/")]
    lead_labels = [label for label, _, _ in nav_links(user=cast.nlp_lead, path="/")]

    assert admin_labels == [item.label for item in NAV]
    hidden = ("Admin", "Audit", "Unattributed", "Remediation")
    assert alice_labels == [item.label for item in NAV if item.label not in hidden]
    assert lead_labels == [item.label for item in NAV if item.label not in hidden[:3]]


@pytest.mark.django_db
def test_the_page_being_shown_is_marked_current_and_only_it(cast):
    links = nav_links(user=cast.admin, path="/findings/")

    assert [label for label, _, current in links if current] == ["Findings"]
