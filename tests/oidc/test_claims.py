"""What a verified token's claims mean to the plane (pure: no keys, no HTTP)."""

from __future__ import annotations

import pytest

from wingsmith.adapters.oidc import OidcConfig, TokenRefused, claim_at, identity_of, looks_like_jwt

CONFIG = OidcConfig(issuer="https://idp.example", audience="wingsmith")


def test_claim_paths_nested_and_namespaced():
    claims = {"realm_access": {"roles": ["viewer"]}, "https://example.com/roles": ["admin"], "a": "x"}
    assert claim_at(claims, "realm_access.roles") == ["viewer"]
    assert claim_at(claims, "https://example.com/roles") == ["admin"]  # Auth0's dotted claim names
    assert claim_at(claims, "realm_access.missing") is None and claim_at(claims, "a.b") is None


@pytest.mark.parametrize(("roles", "plane_roles"), [
    (["viewer", "superuser", "offline_access"], {"viewer"}),
    ("operator approver", {"operator", "approver"}),  # space-separated, as `scope` is
    (None, set()),
])
def test_only_the_planes_roles_count(roles, plane_roles):
    claims = {"sub": "s", "roles": roles} if roles is not None else {"sub": "s"}
    assert identity_of(claims, CONFIG).roles == plane_roles


@pytest.mark.parametrize(("claims", "says"), [
    ({"sub": "s", "roles": [1, 2]}, "not a list of role names"),
    ({"sub": "s", "roles": {"viewer": True}}, "not a list of role names"),
    ({"sub": "s", "preferred_username": ""}, "not a usable name"),
    ({"sub": "s", "preferred_username": "x" * 300}, "not a usable name"),
    ({"sub": "s", "preferred_username": "a\nb"}, "not a usable name"),
    ({"sub": "s", "preferred_username": "\ud800"}, "not a usable name"),
    ({"sub": 7}, "sub claim is not a string"),
    ({"sub": "s", "team": {"name": "ml"}}, "not one team name"),
])
def test_malformed_claims_are_refused(claims, says):
    with pytest.raises(TokenRefused, match=says):
        identity_of(claims, CONFIG)


def test_team_and_name():
    identity = identity_of({"sub": "s-1", "preferred_username": "olga", "team": ["ml"]}, CONFIG)
    assert (identity.name, identity.subject, identity.team) == ("olga", "s-1", "ml")
    assert identity_of({"sub": "s-1"}, CONFIG).team is None


def test_what_looks_like_a_jwt():
    assert looks_like_jwt("eyJh.eyJz.c2ln") and looks_like_jwt("eyJh.eyJz.")
    assert not looks_like_jwt("tok-olga") and not looks_like_jwt("a.b.c.d") and not looks_like_jwt("a b.c.d")
    assert not looks_like_jwt("a." + "b" * 20000 + ".c")
