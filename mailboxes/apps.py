from django.apps import AppConfig


class MailboxesConfig(AppConfig):
    name = "mailboxes"
    verbose_name = "Mailboxes and AgentMail"
