"""(placeholder: filled in by the indexing work of issue 4)"""
