import { describe, expect, it } from 'vitest';
import { parseSkillInfo } from './skill-sources.ts';

describe('parseSkillInfo', () => {
  it('reads name and description from YAML front matter, folding whitespace', () => {
    const markdown = '---\nname: pdf-tools\ndescription: |\n  Extract text\n  from PDFs.\nlicense: MIT\n---\n# Body\n';
    expect(parseSkillInfo(markdown, 'pdf')).toEqual({ name: 'pdf-tools', description: 'Extract text from PDFs.' });
  });

  it('falls back to the folder name without front matter, or with front matter that is not YAML', () => {
    expect(parseSkillInfo('# Just a title\n', 'writing')).toEqual({ name: 'writing', description: '' });
    expect(parseSkillInfo('---\nname: [unclosed\n---\n', 'broken')).toEqual({ name: 'broken', description: '' });
    expect(parseSkillInfo('---\n- a list\n---\n', 'listed')).toEqual({ name: 'listed', description: '' });
  });

  it('bounds what goes into the instructions', () => {
    const info = parseSkillInfo(`---\nname: ${'n'.repeat(200)}\ndescription: ${'d'.repeat(5000)}\n---\n`, 'x');
    expect(info.name).toHaveLength(64);
    expect(info.description).toHaveLength(1024);
  });
});
