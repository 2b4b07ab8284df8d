"""What pyproject.toml cannot say: the start-up hook ``aiflows_jarvis_tokenizer_seed.pth`` at the root of the wheel.

A wheel's root is site-packages, where the interpreter runs the ``import`` line of every ``.pth`` file at start (see
aiflows_jarvis_tokenizer_seed.py). setuptools has no setting for a file there, so ``build_py`` copies it:

* for a wheel (``pip install .``), into ``build_lib``, the tree the wheel is made of;
* for an editable wheel (``pip install -e .``, PEP 660), whose ``build_lib`` setuptools throws away (the wheel only
  points at the sources), into the folder the editable wheel is made of: the ``install`` command's ``install_lib``,
  where setuptools writes what an editable install copies rather than links (scripts, data).

Either way the file is in the wheel's RECORD, so ``pip uninstall`` removes it. It is also an sdist's source file.
"""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

START_UP_HOOK = "aiflows_jarvis_tokenizer_seed.pth"


class build_py_with_start_up_hook(build_py):
    def run(self):
        super().run()
        folder = self.get_finalized_command("install").install_lib if self.editable_mode else self.build_lib
        self.copy_file(START_UP_HOOK, os.path.join(folder, START_UP_HOOK), preserve_mode=False)

    def get_outputs(self, include_bytecode=True):
        outputs = list(super().get_outputs(include_bytecode))
        return outputs if self.editable_mode else outputs + [os.path.join(self.build_lib, START_UP_HOOK)]

    def get_source_files(self):
        return list(super().get_source_files()) + [START_UP_HOOK]


setup(cmdclass={"build_py": build_py_with_start_up_hook})
