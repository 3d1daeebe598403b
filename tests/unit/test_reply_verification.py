"""Which replies count (`app.outcomes.verification`): from an address the email went to; through its plus-address
when it went to one recipient; from a recipient's domain only when the setting allows; each as that recipient's."""

from app.outcomes.verification import Sends, domain_of


def sends(*recipients: tuple[str, str | None]) -> Sends:
    found = Sends()
    for recipient, domain in recipients:
        found.add(recipient, domain)
    return found


def test_the_domain_of_an_address_and_of_a_key_that_is_none():
    assert domain_of(" Priya@Clinica.Example ") == "clinica.example"
    assert domain_of("crm-42") is None and domain_of("@clinica.example") is None and domain_of("priya@") is None


def test_a_reply_counts_from_a_recipient_and_as_that_recipient():
    two = sends(("a", "d1"), ("b", "d2"))
    assert two.counted_as("a", "d1", plus_addressed=False, accept_domain=False) == "a"
    assert two.counted_as("z", "d9", plus_addressed=False, accept_domain=True) is None


def test_a_plus_address_reply_is_its_one_recipients_and_none_where_the_email_had_several():
    assert sends(("a", "d1")).counted_as("z", "d9", plus_addressed=True, accept_domain=False) == "a"
    assert sends(("a", "d1"), ("b", "d1")).counted_as("z", "d9", plus_addressed=True, accept_domain=False) is None
    assert Sends().counted_as("z", "d9", plus_addressed=True, accept_domain=False) is None  # sent to nobody known


def test_a_colleagues_reply_counts_only_with_the_setting_and_as_the_same_recipient_whatever_the_order():
    one_way, other_way = sends(("b", "d1"), ("a", "d1")), sends(("a", "d1"), ("b", "d1"))
    assert one_way.counted_as("z", "d1", plus_addressed=False, accept_domain=False) is None
    assert one_way.counted_as("z", "d1", plus_addressed=False, accept_domain=True) == "a"
    assert other_way.counted_as("z", "d1", plus_addressed=False, accept_domain=True) == "a"
