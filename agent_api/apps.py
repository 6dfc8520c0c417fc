from django.apps import AppConfig


class AgentApiConfig(AppConfig):
    name = "agent_api"
    verbose_name = "Agent API"
