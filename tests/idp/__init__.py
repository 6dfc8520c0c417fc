"""A real OpenID Connect identity provider for the single sign-on tests: a second, small Django
process with django-oauth-toolkit, started on a free loopback port by tests/tenants/oidc_fixtures.py.
Its RSA signing key is generated at test time and passed in the environment (never on disk in git).
"""
