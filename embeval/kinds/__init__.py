"""The kinds of task, one module each (embeval.tasks.kind describes what a kind module declares;
embeval.tasks.registry.KINDS registers each module once)."""
