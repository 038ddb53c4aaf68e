"""The one rule for a name that becomes a folder or a table's row: a suite's, a dataset's and a method's. The suite
format checks it (tabbench.suite); the reports refuse a record that breaks it (tabbench.pooling), so that a name
never carries markup into a table or a page. Here, apart, so that a report reads it without the suite package."""

#: A name that becomes a folder (the suite's, under --results) or may become one (datasets, methods):
#: letters, digits, '-', '_' and '.', not starting with a dot, so never '..', a '/' or an absolute path.
NAME_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$"
NAME_RULE = "a plain folder name (letters, digits, '-', '_' and '.', not starting with a dot)"
