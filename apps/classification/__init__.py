"""Classification of token records: which rule (and so which cost class) a record falls into."""
