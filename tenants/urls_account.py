"""A person's own security pages, mounted at /account/ by tenants/urls.py."""

from django.urls import path

from tenants import views_passkeys, views_sudo
from tenants import views_signin as views

urlpatterns = [
    path("security/", views.account_security, name="account_security"),
    path("confirm/", views_sudo.account_confirm, name="account_confirm"),
    path("security/totp/", views.totp_enrol, name="totp_enrol"),
    path("security/totp/confirm/", views.totp_confirm, name="totp_confirm"),
    path("security/recovery-codes/", views.recovery_codes_renew, name="recovery_codes_renew"),
    path("security/remove/", views.two_factor_remove, name="two_factor_remove"),
    path("passkeys/options/", views_passkeys.register_options, name="passkey_register_options"),
    path("passkeys/", views_passkeys.register, name="passkey_register"),
    path("passkeys/<int:passkey_id>/remove/", views_passkeys.remove, name="passkey_remove"),
    path("password/", views.password_change, name="password_change"),
    path("sessions/", views.sessions, name="sessions"),
    path("sessions/<int:session_id>/end/", views.session_end, name="session_end"),
]
