"""A new message names no thread (draft_thread_only_for_replies).

AgentMail's send route starts a thread of its own; only its reply route joins one. A new message
drafted before the API refused a thread id without in_reply_to (thread_id_without_in_reply_to)
may still name one, and the review page showed that thread's conversation beside it. Such rows
forget the thread first: their message started, or will start, its own (the send's own thread is
on the intent, provider_thread_id).
"""

from django.db import migrations, models


def forget_threads_of_new_messages(apps, schema_editor):
    Draft = apps.get_model("intents", "Draft")
    Draft.objects.filter(in_reply_to="").exclude(thread_id="").update(thread_id="")


class Migration(migrations.Migration):
    dependencies = [
        ("intents", "0028_suppressions_composed"),
    ]

    operations = [
        migrations.RunPython(forget_threads_of_new_messages, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="draft",
            constraint=models.CheckConstraint(
                condition=models.Q(thread_id="") | ~models.Q(in_reply_to=""),
                name="draft_thread_only_for_replies",
            ),
        ),
    ]
