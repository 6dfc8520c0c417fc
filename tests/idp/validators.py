from oauth2_provider.oauth2_validators import OAuth2Validator


class EmailClaims(OAuth2Validator):
    """The ID token carries the person's address, as a company's identity provider would."""

    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "email_verified": "email"}

    def get_additional_claims(self, request):
        return {
            "email": request.user.email,
            "email_verified": True,
            "name": request.user.get_full_name(),
        }
