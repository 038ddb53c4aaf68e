def from_markdown(lines, out_dir):
    return ""
def write_page(ctx, parts):
    pass
