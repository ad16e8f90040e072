#!/usr/bin/env python3
# Wraps a decision tree's JSON in a C++ raw string, so the built-in trees are
# compiled into the library from the JSON files users read and copy.
#
#   embed_tree.py trees/selection.json out.cpp pure_tree_json
import os
import sys

source, output, name = sys.argv[1:4]
text = open(source, encoding='utf-8').read()
delimiter = 'tutti_json'
if ')' + delimiter + '"' in text:
    sys.exit(f'{source}: contains the raw-string delimiter ){delimiter}"')
with open(output, 'w', encoding='utf-8') as out:
    out.write(f'// Generated from {os.path.basename(source)} by embed_tree.py; edit the JSON file.\n')
    out.write('#include <string_view>\n\n')
    out.write('namespace tutti::select_detail {\n')
    out.write(f'extern const std::string_view {name};\n')
    out.write(f'const std::string_view {name} = R"{delimiter}({text}){delimiter}";\n')
    out.write('} // namespace tutti::select_detail\n')
