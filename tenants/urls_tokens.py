from django.urls import path

from tenants import views_tokens

urlpatterns = [
    path("", views_tokens.token_list, name="token_list"),
    path("new/", views_tokens.token_new, name="token_new"),
    path("<int:token_id>/revoke/", views_tokens.token_revoke_view, name="token_revoke"),
]
