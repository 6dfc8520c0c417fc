"""The review queue, the draft page and its decisions, the outbox and the needs-attention view.

Thin views: resolve access (tenant_view), parse input (review.forms), call one service or
selector, render. A business refusal renders as a message on the page (or an htmx fragment),
never a 500; a decision outside the person's rights is a 403 that says so.
"""
